package olt

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/olt/huawei"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// stored is a registered OLT as kept in etcd under /router/olt/olts/<name>:
// the record and its sealed credentials (never the plain ones).
type stored struct {
	api.OLTRecord
	// Sealed is base64(nonce || AES-256-GCM({user, pass})), additional
	// data "olt:<name>".
	Sealed string `json:"sealed"`
}

func (s *Service) key(name string) string { return s.st.Key("olts", name) }

// lookup returns a registered OLT and its opened credentials.
func (s *Service) lookup(ctx context.Context, name string) (*stored, credentials, error) {
	rec, _, err := store.Get[stored](ctx, s.st, s.key(name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, credentials{}, apierr.NotFound("No such OLT: %s", name)
	}
	if err != nil {
		return nil, credentials{}, err
	}
	c, err := s.seal.open(rec.Name, rec.Sealed)
	if err != nil {
		return nil, c, apierr.Internal(err.Error(), "the credentials of OLT %s cannot be opened", name)
	}
	return &rec, c, nil
}

func (s *Service) all(ctx context.Context) ([]stored, error) {
	items, err := store.List[stored](ctx, s.st, s.st.Key("olts")+"/")
	if err != nil {
		return nil, err
	}
	out := make([]stored, 0, len(items))
	for _, it := range items {
		out = append(out, it.Value)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// List is GET /olts.
func (s *Service) List(ctx context.Context, _ *api.None) (*api.OLTList, error) {
	recs, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	out := &api.OLTList{OLTs: make([]api.OLTRecord, 0, len(recs))}
	for _, r := range recs {
		out.OLTs = append(out.OLTs, r.OLTRecord)
	}
	out.Count = len(out.OLTs)
	return out, nil
}

// apply copies the fields sent onto rec.
func apply(rec *api.OLTRecord, f *api.OLTFields) {
	if f.Host != "" {
		rec.Host = f.Host
	}
	if f.Protocol != "" {
		rec.Protocol = f.Protocol
	}
	if f.Port != 0 {
		rec.Port = f.Port
	}
	if f.Vendor != "" {
		rec.Vendor = f.Vendor
	}
	if f.SVLAN != nil {
		rec.SVLAN = *f.SVLAN
	}
	if f.Operator != nil {
		rec.Operator = *f.Operator
	}
	if f.IPTVVLAN != nil {
		rec.IPTVVLAN = *f.IPTVVLAN
	}
	if f.Prefix != "" {
		rec.Prefix = f.Prefix
	}
	if f.Comment != nil {
		rec.Comment = *f.Comment
	}
	if f.RxMinDBm != nil {
		rec.RxMinDBm = *f.RxMinDBm
	}
	if f.RxMaxDBm != nil {
		rec.RxMaxDBm = *f.RxMaxDBm
	}
	if f.AcceptHostKey {
		rec.SSHHostKey, rec.SSHHostKeyFingerprint = "", ""
	}
	if rec.Protocol == "" {
		rec.Protocol = "telnet"
	}
	if rec.Vendor == "" {
		rec.Vendor = defaultVendor
	}
}

// checkRecord refuses what the field rules alone cannot: optical
// thresholds that leave no room between them (with the router's own for
// the one not set).
func (s *Service) checkRecord(rec *api.OLTRecord) error {
	lo, hi := s.rxThresholds(nil)
	if rec.RxMinDBm != 0 {
		lo = rec.RxMinDBm
	}
	if rec.RxMaxDBm != 0 {
		hi = rec.RxMaxDBm
	}
	if lo >= hi {
		return apierr.Invalid("rx_min_dbm", "rx_min_dbm (%v) must be below rx_max_dbm (%v)", lo, hi)
	}
	return nil
}

// Add is POST /olts.
func (s *Service) Add(ctx context.Context, in *api.OLTAdd) (*api.OLTPutAnswer, error) {
	now := s.now().Format(timeLayout)
	rec := api.OLTRecord{Name: in.Name, Created: now, Updated: now}
	apply(&rec, &in.OLTFields)
	if err := s.checkRecord(&rec); err != nil {
		return nil, err
	}
	c := credentials{User: in.User, Pass: in.Pass}
	sealed, err := s.seal.seal(rec.Name, c)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "cannot seal the OLT's credentials")
	}
	rec.UserSet, rec.PasswordSet = c.User != "", c.Pass != ""
	k := s.key(rec.Name)
	if _, err := s.st.Txn().IfAbsent(k).Put(k, stored{OLTRecord: rec, Sealed: sealed}).Commit(ctx); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, apierr.Conflict("OLT %s is registered already; change it with POST /olts/%s", rec.Name, rec.Name)
		}
		return nil, err
	}
	s.log.Info("OLT registered", "olt", rec.Name, "host", rec.Host, "by", api.OriginOf(ctx).String())
	return &api.OLTPutAnswer{Result: api.Result{Code: http.StatusCreated, Message: "OLT registered"}, OLT: rec}, nil
}

// Set is POST /olts/{name}.
func (s *Service) Set(ctx context.Context, in *api.OLTSet) (*api.OLTPutAnswer, error) {
	for {
		k := s.key(in.Name)
		cur, rev, err := store.Get[stored](ctx, s.st, k)
		if errors.Is(err, store.ErrNotFound) {
			return nil, apierr.NotFound("No such OLT: %s", in.Name)
		}
		if err != nil {
			return nil, err
		}
		rec := cur.OLTRecord
		apply(&rec, &in.OLTFields)
		if err := s.checkRecord(&rec); err != nil {
			return nil, err
		}
		sealed := cur.Sealed
		if in.User != "" || in.Pass != "" {
			c, err := s.seal.open(cur.Name, cur.Sealed)
			if err != nil {
				return nil, apierr.Internal(err.Error(), "the credentials of OLT %s cannot be opened; send both user and pass", in.Name)
			}
			if in.User != "" {
				c.User = in.User
			}
			if in.Pass != "" {
				c.Pass = in.Pass
			}
			if sealed, err = s.seal.seal(rec.Name, c); err != nil {
				return nil, apierr.Internal(err.Error(), "cannot seal the OLT's credentials")
			}
			rec.UserSet, rec.PasswordSet = c.User != "", c.Pass != ""
		}
		rec.Updated = s.now().Format(timeLayout)
		_, err = s.st.Txn().IfRevision(k, rev).Put(k, stored{OLTRecord: rec, Sealed: sealed}).Commit(ctx)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.drivers.Forget(cur.Host)
		s.log.Info("OLT changed", "olt", rec.Name, "host", rec.Host, "by", api.OriginOf(ctx).String())
		return &api.OLTPutAnswer{Result: api.Result{Code: http.StatusOK, Message: "OLT updated"}, OLT: rec}, nil
	}
}

// Delete is DELETE /olts/{name}.
func (s *Service) Delete(ctx context.Context, in *api.OLTNameRef) (*api.OLTDeleteAnswer, error) {
	k := s.key(in.Name)
	cur, rev, err := store.Get[stored](ctx, s.st, k)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.NotFound("No such OLT: %s", in.Name)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.st.Txn().IfRevision(k, rev).Delete(k).Commit(ctx); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, apierr.Conflict("OLT %s changed meanwhile; try again", in.Name)
		}
		return nil, err
	}
	s.drivers.Forget(cur.Host)
	s.log.Info("OLT forgotten", "olt", in.Name, "by", api.OriginOf(ctx).String())
	return &api.OLTDeleteAnswer{Result: api.Result{Message: "OLT deleted"}, Name: in.Name}, nil
}

// sshSeen records what an SSH handshake learnt on every registered OLT at
// that address: the host key when none is recorded yet (trust on first
// use), and the legacy algorithms it needed.
func (s *Service) sshSeen(seen huawei.SSHSeen) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	recs, err := s.all(ctx)
	if err != nil {
		return
	}
	for _, r := range recs {
		if r.Host != seen.Host || r.Port != seen.Port || r.Protocol != "ssh" {
			continue
		}
		for try := 0; try < 3; try++ {
			k := s.key(r.Name)
			cur, rev, err := store.Get[stored](ctx, s.st, k)
			if err != nil {
				break
			}
			changed := false
			if cur.SSHHostKey == "" && seen.HostKey != "" {
				cur.SSHHostKey, cur.SSHHostKeyFingerprint, changed = seen.HostKey, seen.Fingerprint, true
				s.log.Info("olt ssh host key recorded", "olt", r.Name, "fingerprint", seen.Fingerprint)
			}
			if !slices.Equal(cur.SSHLegacy, seen.Legacy) && cur.SSHHostKey == seen.HostKey {
				cur.SSHLegacy, changed = seen.Legacy, true
				if len(seen.Legacy) > 0 {
					s.log.Warn("olt needs legacy ssh algorithms", "olt", r.Name, "algorithms", seen.Legacy)
				}
			}
			if !changed {
				break
			}
			if _, err := s.st.Txn().IfRevision(k, rev).Put(k, cur).Commit(ctx); !errors.Is(err, store.ErrConflict) {
				break
			}
		}
	}
}
