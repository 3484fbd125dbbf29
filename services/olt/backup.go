package olt

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/olt/driver"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
)

// Backups live in two documents per revision so a listing never reads the
// texts: /router/olt/backup-index/<olt>/<rev> (api.OLTBackupInfo) and
// /router/olt/backup-data/<olt>/<rev> ({gz}: the gzip'd text). Revisions
// are numbered from 1 per OLT, zero-padded in the key so keys sort.

// DefaultBackupKeep is how many revisions an OLT keeps; older ones are
// deleted when a new one is stored.
const DefaultBackupKeep = 30

type backupData struct {
	GZ []byte `json:"gz"`
}

func revKey(rev int) string { return fmt.Sprintf("%09d", rev) }

func (s *Service) indexPrefix(name string) string { return s.st.Key("backup-index", name) + "/" }
func (s *Service) dataKey(name string, rev int) string {
	return s.st.Key("backup-data", name, revKey(rev))
}

// newest returns the newest revision's info, or nil.
func (s *Service) newest(ctx context.Context, name string) (*api.OLTBackupInfo, error) {
	list, err := s.revisions(ctx, name, 1)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return &list[0], nil
}

// revisions lists up to n revisions, newest first.
func (s *Service) revisions(ctx context.Context, name string, n int) ([]api.OLTBackupInfo, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
	if n > 0 {
		opts = append(opts, clientv3.WithLimit(int64(n)))
	}
	resp, err := s.st.Client().Get(ctx, s.indexPrefix(name), opts...)
	if err != nil {
		return nil, err
	}
	out := make([]api.OLTBackupInfo, 0, len(resp.Kvs))
	var broken []string
	for _, kv := range resp.Kvs {
		var b api.OLTBackupInfo
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			broken = append(broken, string(kv.Key))
			continue
		}
		out = append(out, b)
	}
	if len(broken) > 0 {
		return nil, &store.BrokenError{Keys: broken}
	}
	return out, nil
}

// text returns a stored revision's configuration; 404 when not stored.
func (s *Service) text(ctx context.Context, name string, rev int) (string, error) {
	d, _, err := store.Get[backupData](ctx, s.st, s.dataKey(name, rev))
	if errors.Is(err, store.ErrNotFound) {
		return "", apierr.NotFound("OLT %s has no revision %d", name, rev)
	}
	if err != nil {
		return "", err
	}
	zr, err := gzip.NewReader(bytes.NewReader(d.GZ))
	if err != nil {
		return "", &store.BrokenError{Keys: []string{s.dataKey(name, rev)}}
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return "", &store.BrokenError{Keys: []string{s.dataKey(name, rev)}}
	}
	return string(raw), nil
}

// readConfig reads an OLT's running configuration now.
func (s *Service) readConfig(ctx context.Context, t *target, timeout time.Duration) (string, error) {
	if timeout == 0 {
		timeout = driver.LongTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d, err := s.drivers.Get(t.cfg)
	if err != nil {
		return "", err
	}
	res, err := d.Config(ctx, driver.Options{Timeout: timeout})
	if err != nil {
		return "", err
	}
	return res.Config, nil
}

// backupOne stores the OLT's configuration as a new revision unless it
// equals the newest.
func (s *Service) backupOne(ctx context.Context, t *target, timeout time.Duration, trigger string) api.OLTBackupDone {
	name := t.ref.Name
	done := api.OLTBackupDone{OLT: name}
	fail := func(err error) api.OLTBackupDone {
		done.Error = err.Error()
		s.log.Warn("olt backup failed", "olt", name, "trigger", trigger, "error", err)
		return done
	}
	cfg, err := s.readConfig(ctx, t, timeout)
	if err != nil {
		return fail(err)
	}
	sum := sha256.Sum256([]byte(cfg))
	info := api.OLTBackupInfo{Time: s.now().Format(timeLayout), Lines: len(splitLines(cfg)), Bytes: len(cfg),
		SHA256: hex.EncodeToString(sum[:]), Trigger: trigger}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write([]byte(cfg))
	zw.Close()
	for {
		last, err := s.newest(ctx, name)
		if err != nil {
			return fail(err)
		}
		if last != nil && last.SHA256 == info.SHA256 {
			done.OK, done.Rev, done.Lines, done.Bytes = true, last.Rev, last.Lines, last.Bytes
			return done
		}
		info.Rev = 1
		if last != nil {
			info.Rev = last.Rev + 1
		}
		ik := s.indexPrefix(name) + revKey(info.Rev)
		txn := s.st.Txn().IfAbsent(ik).Put(ik, info).Put(s.dataKey(name, info.Rev), backupData{GZ: buf.Bytes()})
		s.prune(txn, name, info.Rev)
		_, err = txn.Commit(ctx)
		if errors.Is(err, store.ErrConflict) {
			continue // another replica stored this revision meanwhile
		}
		if err != nil {
			return fail(err)
		}
		break
	}
	s.log.Info("olt backup", "olt", name, "rev", info.Rev, "lines", info.Lines, "bytes", info.Bytes, "stored_bytes", buf.Len(), "trigger", trigger)
	done.OK, done.Changed, done.Rev, done.Lines, done.Bytes = true, true, info.Rev, info.Lines, info.Bytes
	return done
}

// prune adds to txn the deletion of the revisions older than the newest
// keep, so that the new revision and the trim of the oldest commit
// together: the history never holds more than keep, not even between
// two writes (GET /olt/backups listed keep+1 in that gap).
func (s *Service) prune(txn *store.Txn, name string, newest int) {
	keep := s.deps.BackupKeep
	if keep <= 0 {
		keep = DefaultBackupKeep
	}
	old := newest - keep
	if old < 1 {
		return
	}
	// Everything up to and including rev old, in both prefixes.
	for _, p := range []string{"backup-index", "backup-data"} {
		txn.DeleteRange(s.st.Key(p, name)+"/", s.st.Key(p, name, revKey(old+1)))
	}
}

// targets resolves an optional name: that OLT, else every registered one.
func (s *Service) targets(ctx context.Context, name string) ([]*target, error) {
	if name != "" {
		rec, c, err := s.lookup(ctx, name)
		if err != nil {
			return nil, err
		}
		return []*target{registered(rec, c)}, nil
	}
	recs, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	var out []*target
	for _, r := range recs {
		rec, c, err := s.lookup(ctx, r.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, registered(rec, c))
	}
	return out, nil
}

// only resolves an optional name for reads of one OLT: that OLT, else the
// only registered one, else 400.
func (s *Service) only(ctx context.Context, name string) (*target, error) {
	if name != "" {
		rec, c, err := s.lookup(ctx, name)
		if err != nil {
			return nil, err
		}
		return registered(rec, c), nil
	}
	all, err := s.targets(ctx, "")
	if err != nil {
		return nil, err
	}
	if len(all) != 1 {
		return nil, apierr.Invalid("olt", "name a registered OLT with olt (%d registered)", len(all))
	}
	return all[0], nil
}

// Backup is POST /olt/backup.
func (s *Service) Backup(ctx context.Context, in *api.OLTBackupRequest) (*api.OLTBackupAnswer, error) {
	ts, err := s.targets(ctx, in.OLT)
	if err != nil {
		return nil, err
	}
	ans := &api.OLTBackupAnswer{Backups: []api.OLTBackupDone{}}
	for _, t := range ts {
		d := s.backupOne(ctx, t, time.Duration(in.Timeout)*time.Second, "api")
		if !d.OK {
			ans.Code = 502
		}
		ans.Backups = append(ans.Backups, d)
	}
	ans.Count = len(ans.Backups)
	return ans, nil
}

// Backups is GET /olt/backups.
func (s *Service) Backups(ctx context.Context, in *api.OLTBackupsRequest) (*api.OLTBackupList, error) {
	t, err := s.only(ctx, in.OLT)
	if err != nil {
		return nil, err
	}
	list, err := s.revisions(ctx, t.ref.Name, in.N)
	if err != nil {
		return nil, err
	}
	return &api.OLTBackupList{OLT: t.ref.Name, Count: len(list), Backups: list}, nil
}

// Diff is GET /olt/diff.
func (s *Service) Diff(ctx context.Context, in *api.OLTDiffRequest) (*api.OLTDiff, error) {
	t, err := s.only(ctx, in.OLT)
	if err != nil {
		return nil, err
	}
	name := t.ref.Name
	rev := in.Rev
	if rev == 0 {
		last, err := s.newest(ctx, name)
		if err != nil {
			return nil, err
		}
		if last == nil {
			return nil, apierr.NotFound("OLT %s has no backup yet: POST /olt/backup first", name)
		}
		rev = last.Rev
	}
	from, err := s.text(ctx, name, rev)
	if err != nil {
		return nil, err
	}
	ans := &api.OLTDiff{OLT: name, From: "rev " + strconv.Itoa(rev)}
	var to string
	if in.To == "" || in.To == "now" {
		ans.To = "now"
		if to, err = s.readConfig(ctx, t, 0); err != nil {
			return nil, apierr.Upstream(err.Error(), "the running configuration of OLT %s could not be read: %v", name, err)
		}
	} else {
		n, _ := strconv.Atoi(in.To)
		ans.To = "rev " + in.To
		if to, err = s.text(ctx, name, n); err != nil {
			return nil, err
		}
	}
	ans.Diff, ans.Added, ans.Removed = unified(ans.From, ans.To, from, to)
	ans.Changed = ans.Added+ans.Removed > 0
	return ans, nil
}

// Sync is POST /olt/sync: the router's plans to every OLT asked, one at a
// time, each under its write lock.
func (s *Service) Sync(ctx context.Context, in *api.OLTSyncRequest) (*api.OLTSyncAnswer, error) {
	ts, err := s.targets(ctx, in.OLT)
	if err != nil {
		return nil, err
	}
	plans, err := bus.Invoke(ctx, s.deps.NC, api.PlansList, &api.None{})
	if err != nil {
		return nil, apierr.Unavailable("the router's plans could not be read: %v", err)
	}
	args := driver.PlanSyncArgs{Options: driver.Options{DryRun: in.DryRun}}
	for _, p := range plans.Plans {
		args.Plans = append(args.Plans, driver.Plan{Name: p.Name, DownKbps: int(p.DownMbps * 1000), UpKbps: int(p.UpMbps * 1000)})
	}
	ans := &api.OLTSyncAnswer{DryRun: in.DryRun, Plans: len(args.Plans), OLTs: []api.OLTSyncDone{}}
	for _, t := range ts {
		d := api.OLTSyncDone{OLT: t.ref.Name}
		res, err := s.syncOne(ctx, t, args)
		if err != nil {
			d.Error = err.Error()
			ans.Code = 502
			s.log.Warn("olt plan sync failed", "olt", t.ref.Name, "error", err)
		} else {
			d.OK, d.Result = true, res
			s.log.Info("olt plan sync", "olt", t.ref.Name, "plans", len(args.Plans), "dry_run", in.DryRun)
		}
		ans.OLTs = append(ans.OLTs, d)
	}
	ans.Count = len(ans.OLTs)
	return ans, nil
}

func (s *Service) syncOne(ctx context.Context, t *target, args driver.PlanSyncArgs) (*driver.PlanSyncResult, error) {
	ctx, cancel := context.WithTimeout(ctx, driver.LongTimeout)
	defer cancel()
	if !args.DryRun {
		if err := s.licensed(); err != nil {
			return nil, err
		}
		lock, err := store.Acquire(ctx, s.deps.KV, t.lock)
		if err != nil {
			return nil, fmt.Errorf("another write to OLT %s did not finish in time: %w", t.ref.Host, err)
		}
		defer lock.Unlock(context.WithoutCancel(ctx))
	}
	d, err := s.drivers.Get(t.cfg)
	if err != nil {
		return nil, err
	}
	if len(args.Plans) == 0 {
		return &driver.PlanSyncResult{WriteResult: driver.WriteResult{Commands: []string{}}}, nil
	}
	return d.PlanSync(ctx, args)
}

// bindCoded is bus.Bind for answers whose Result may carry a failure
// code (502 when an OLT failed): ok follows the code.
func bindCoded[Req, Resp any](op api.Op[Req, Resp], fn func(context.Context, *Req) (*Resp, error)) bus.Endpoint {
	ep := bus.Bind(op, fn)
	inner := ep.Handler
	ep.Handler = func(ctx context.Context, req *pb.Request) (int, any, error) {
		status, body, err := inner(ctx, req)
		if o, ok := body.(api.Outcomer); ok && err == nil && status >= 400 {
			o.Outcome().OK = false
		}
		return status, body, err
	}
	return ep
}

// periodicBackups backs up every registered OLT each BackupEvery. Across
// replicas one does it: each OLT's round is claimed with a lock held while
// it runs, and skipped when the newest revision is younger than half the
// period (another replica just made it).
func (s *Service) periodicBackups(ctx context.Context) {
	every := s.deps.BackupEvery
	if every == 0 {
		every = DefaultBackupEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ts, err := s.targets(ctx, "")
		if err != nil {
			s.log.Warn("olt periodic backup: registry unreadable", "error", err)
			continue
		}
		for _, tg := range ts {
			lock, err := store.TryLock(ctx, s.deps.KV, "olt-backup/"+tg.ref.Name)
			if err != nil {
				continue
			}
			if last, err := s.newest(ctx, tg.ref.Name); err == nil && last != nil {
				if at, err := time.ParseInLocation(timeLayout, last.Time, time.Local); err == nil && s.now().Sub(at) < every/2 {
					lock.Unlock(context.WithoutCancel(ctx))
					continue
				}
			}
			s.backupOne(ctx, tg, 0, "periodic")
			lock.Unlock(context.WithoutCancel(ctx))
		}
	}
}

// syncer runs the background plan synchronisation: one at a time; a
// request while one runs makes one more run after it (plans changed
// meanwhile are then pushed too).
type syncer struct {
	mu      sync.Mutex
	running bool
	again   bool
}

// SyncStart is sync.start: every registered OLT brought in step with the
// plans in the background; the answer is how many OLTs.
func (s *Service) SyncStart(ctx context.Context, _ *api.None) (*api.OLTSyncStarted, error) {
	n, err := s.st.Count(ctx, s.st.Key("olts")+"/")
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return &api.OLTSyncStarted{}, nil
	}
	s.sync.mu.Lock()
	if s.sync.running {
		s.sync.again = true
		s.sync.mu.Unlock()
		return &api.OLTSyncStarted{OLTs: int(n)}, nil
	}
	s.sync.running = true
	s.sync.mu.Unlock()
	s.bg.Go(func() {
		for {
			ctx, cancel := context.WithTimeout(s.bgCtx, 10*time.Minute)
			ans, err := s.Sync(ctx, &api.OLTSyncRequest{})
			cancel()
			if err != nil {
				s.log.Warn("olt background plan sync failed", "error", err)
			} else {
				s.log.Info("olt background plan sync", "olts", ans.Count, "plans", ans.Plans, "code", ans.Code)
			}
			s.sync.mu.Lock()
			if !s.sync.again || s.bgCtx.Err() != nil {
				s.sync.running = false
				s.sync.mu.Unlock()
				return
			}
			s.sync.again = false
			s.sync.mu.Unlock()
		}
	})
	return &api.OLTSyncStarted{OLTs: int(n)}, nil
}
