package netcfg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/proto/kernel"
	"routerd.dev/services/netcfg/link"
	"routerd.dev/services/netcfg/network"
	"routerd.dev/services/netcfg/vlan"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
)

// Pending is an apply waiting for confirm, as stored in etcd
// (/router/netcfg/network/pending) and on disk (<dir>/pending.json): the
// previous document, the kernel state and the rendered files before the
// change, so that either copy alone is enough to roll it back.
type Pending struct {
	ID         string           `json:"id"`
	CreatedMS  int64            `json:"created_ms"`
	DeadlineMS int64            `json:"deadline_ms"`
	By         string           `json:"by"`
	Previous   api.NetConfig    `json:"previous"`
	Next       api.NetConfig    `json:"next"`
	Changes    []string         `json:"changes"`
	Snapshot   network.Snapshot `json:"snapshot"`
	Backup     network.Files    `json:"backup"`
	// LocalDone (disk only) says the files and kernel were rolled back
	// while etcd could not be written; the store part is finished at the
	// next term.
	LocalDone bool   `json:"local_done,omitempty"`
	Why       string `json:"why,omitempty"`
}

// netState is the timed apply's state in this process.
type netState struct {
	mu      sync.Mutex // one apply, confirm, rollback or expiry at a time
	timer   *time.Timer
	fst     *store.Store // the term's fenced store; nil between terms
	term    context.Context
	started time.Time
	eth     network.Ethtool
}

func (s *Service) docKey() string     { return s.st.Key("network", "document") }
func (s *Service) pendingKey() string { return s.st.Key("network", "pending") }
func (s *Service) pendingFile() string {
	return filepath.Join(s.deps.StateDir, "pending.json")
}

// loadDoc reads the stored network document (managed false when none).
func (s *Service) loadDoc(ctx context.Context) (api.NetConfig, int64, bool, error) {
	c, rev, err := store.Get[api.NetConfig](ctx, s.st, s.docKey())
	if errors.Is(err, store.ErrNotFound) {
		return network.Normal(api.NetConfig{}), 0, false, nil
	}
	if err != nil {
		return c, 0, false, err
	}
	return network.Normal(c), rev, true, nil
}

func (s *Service) loadPending(ctx context.Context) (*Pending, int64, error) {
	p, rev, err := store.Get[Pending](ctx, s.st, s.pendingKey())
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return &p, rev, nil
}

func (s *Service) diskPending() *Pending {
	raw, err := os.ReadFile(s.pendingFile())
	if err != nil {
		return nil
	}
	var p Pending
	if json.Unmarshal(raw, &p) != nil {
		s.deps.Log.Error("the pending network apply on disk does not parse; ignored", "file", s.pendingFile())
		return nil
	}
	return &p
}

func (s *Service) writeDiskPending(p *Pending) error {
	raw, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.deps.StateDir, 0o700); err != nil {
		return err
	}
	return network.WriteFileSync(s.pendingFile(), raw, 0o600)
}

func (s *Service) removeDiskPending() {
	if err := os.Remove(s.pendingFile()); err != nil && !os.IsNotExist(err) {
		s.deps.Log.Error("removing the pending network apply from disk", "err", err)
	}
}

// storedAddrs is every address stored for an interface (VLANs' and the
// ports'), by interface.
func (s *Service) storedAddrs(ctx context.Context) (map[string][]string, vlan.Document, error) {
	d, err := s.vlans.Export(ctx)
	if err != nil {
		return nil, d, err
	}
	out := map[string][]string{}
	for _, r := range d.VLANs {
		out[r.Name] = append(out[r.Name], r.IPs...)
		out[r.Name] = append(out[r.Name], r.IPs6...)
	}
	for _, a := range d.Addresses {
		out[a.Iface] = append(out[a.Iface], a.CIDR)
	}
	return out, d, nil
}

// kernelView is one reading of the kernel: links, their kinds, addresses.
type kernelView struct {
	links   []netlink.Link
	byName  map[string]netlink.Link
	byIndex map[int]netlink.Link
	addrs   map[string][]netlink.Addr
	drivers map[string]string
}

func (s *Service) readKernel() (*kernelView, error) {
	links, err := link.Links(s.nl)
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	as, err := link.Addrs(s.nl, nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	v := &kernelView{links: links, byName: map[string]netlink.Link{}, byIndex: map[int]netlink.Link{}, addrs: map[string][]netlink.Addr{}, drivers: map[string]string{}}
	for _, l := range links {
		v.byName[l.Attrs().Name] = l
		v.byIndex[l.Attrs().Index] = l
		v.drivers[l.Attrs().Name] = s.net.eth.Driver(l.Attrs().Name)
	}
	for _, a := range as {
		if l, ok := v.byIndex[a.LinkIndex]; ok {
			v.addrs[l.Attrs().Name] = append(v.addrs[l.Attrs().Name], a)
		}
	}
	return v, nil
}

// globalAddr is a kernel address as CIDR, false for link-local and
// loopback ones.
func globalAddr(a netlink.Addr) (netip.Prefix, bool) {
	if a.IPNet == nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLoopback() {
		return netip.Prefix{}, false
	}
	ones, _ := a.Mask.Size()
	return netip.PrefixFrom(ip, ones), true
}

// facts gathers what the field rules need.
func (s *Service) facts(ctx context.Context, kv *kernelView) (network.Facts, error) {
	f := network.Facts{Links: map[string]string{}, Addrs: map[string][]string{}, VLANs: map[string][]string{}}
	stored, d, err := s.storedAddrs(ctx)
	if err != nil {
		return f, err
	}
	for _, l := range kv.links {
		n := l.Attrs().Name
		f.Links[n] = network.Kind(l, kv.drivers[n])
		seen := map[string]bool{}
		for _, a := range kv.addrs[n] {
			if p, ok := globalAddr(a); ok && !seen[p.String()] {
				seen[p.String()] = true
				f.Addrs[n] = append(f.Addrs[n], p.String())
			}
		}
		for _, c := range stored[n] {
			if !seen[c] {
				seen[c] = true
				f.Addrs[n] = append(f.Addrs[n], c)
			}
		}
		if _, ok := l.(*netlink.Vlan); ok {
			if p, ok := kv.byIndex[l.Attrs().ParentIndex]; ok {
				f.VLANs[p.Attrs().Name] = appendOnce(f.VLANs[p.Attrs().Name], n)
			}
		}
	}
	for _, r := range d.VLANs {
		f.VLANs[r.Parent] = appendOnce(f.VLANs[r.Parent], r.Name)
	}
	return f, nil
}

func appendOnce(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
	}
	return append(l, s)
}

// guard is what a change may not take away now.
func (s *Service) guard(local string) (network.Guard, error) {
	g := network.Guard{}
	ss, err := network.SSHSessions(s.diag)
	if err != nil {
		return g, err
	}
	g.SSH = ss
	if a, err := netip.ParseAddr(s.deps.ListenIP); err == nil {
		g.API = a
	}
	if a, err := netip.ParseAddr(local); err == nil {
		g.Caller = a
	}
	return g, nil
}

// gone lists the live addresses a change takes down or away: those of a
// port set down or of a bond deleted, and of the VLANs on top of them.
func gone(cur, next api.NetConfig, f network.Facts) map[string][]string {
	out := map[string][]string{}
	var add func(iface string)
	add = func(iface string) {
		if _, done := out[iface]; done {
			return
		}
		out[iface] = append([]string{}, f.Addrs[iface]...)
		for _, v := range f.VLANs[iface] {
			add(v)
		}
	}
	nextPorts := map[string]api.NetPort{}
	for _, p := range next.Ports {
		nextPorts[p.Name] = p
	}
	for _, p := range cur.Ports {
		if np, ok := nextPorts[p.Name]; ok && p.Up && !np.Up {
			add(p.Name)
		}
	}
	nextBonds := map[string]bool{}
	for _, b := range next.Bonds {
		nextBonds[b.Name] = true
	}
	for _, b := range cur.Bonds {
		if !nextBonds[b.Name] {
			add(b.Name)
		}
	}
	for k, v := range out {
		if len(v) == 0 {
			delete(out, k)
		}
	}
	return out
}

func goneList(g map[string][]string) []string {
	out := []string{}
	for iface, as := range g {
		for _, a := range as {
			out = append(out, iface+" "+a)
		}
	}
	sort.Strings(out)
	return out
}

// planned is a change checked against the rules and the lock-out guard.
type planned struct {
	cur, next api.NetConfig
	rev       int64
	version   string
	changes   []string
	refused   []string
	gone      map[string][]string
}

// plan checks a change: 400 with problems, 409 stale.
func (s *Service) plan(ctx context.Context, in *api.NetworkChange) (*planned, error) {
	cur, rev, managed, err := s.loadDoc(ctx)
	if err != nil {
		return nil, err
	}
	if !managed {
		return nil, apierr.BadRequest("no network configuration is stored yet (POST /network/adopt stores the ports as they are)").
			With("problems", []string{"no network configuration is stored"})
	}
	version := network.Version(cur)
	if in.Version != "" && in.Version != version {
		return nil, apierr.Conflict("the network configuration changed since it was read (version %s, now %s): read it again", in.Version, version).With("version", version)
	}
	kv, err := s.readKernel()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "the kernel's interfaces cannot be read")
	}
	f, err := s.facts(ctx, kv)
	if err != nil {
		return nil, err
	}
	next, changes, probs := network.Merge(cur, in, f)
	if len(probs) > 0 {
		list := make([]string, len(probs))
		for i, p := range probs {
			list[i] = p.String()
		}
		return nil, apierr.Invalid(probs[0].Field, "invalid change: %s", strings.Join(list, "; ")).With("problems", list)
	}
	if len(changes) == 0 || network.Version(next) == version {
		return nil, apierr.BadRequest("nothing changes").With("problems", []string{"nothing changes: send only the fields that change"})
	}
	g, err := s.guard(in.Local)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "the kernel's socket table cannot be read")
	}
	gn := gone(cur, next, f)
	what := func(iface string) string { return "the change of " + iface }
	return &planned{cur: cur, next: next, rev: rev, version: version, changes: changes, refused: g.Refusals(gn, what), gone: gn}, nil
}

// networkPlan answers POST /network/plan.
func (s *Service) networkPlan(ctx context.Context, in *api.NetworkChange) (*api.NetworkPlan, error) {
	p, err := s.plan(ctx, in)
	if err != nil {
		return nil, err
	}
	pend, _, err := s.loadPending(ctx)
	if err != nil {
		return nil, err
	}
	return &api.NetworkPlan{Version: p.version, Changes: p.changes, Report: network.Report(p.cur, p.next),
		Refused: nonNilS(p.refused), AddressesGone: goneList(p.gone), Pending: pend != nil}, nil
}

func nonNilS(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func (s *Service) window() time.Duration {
	if s.deps.Confirm > 0 {
		return s.deps.Confirm
	}
	return api.NetworkConfirmWindow
}

// render renders c with the addresses and VLANs stored now (the VLANs'
// own files too, so that the router boots with both).
func (s *Service) render(ctx context.Context, c api.NetConfig, version string) network.Files {
	addrs, d, err := s.storedAddrs(ctx)
	if err != nil {
		s.deps.Log.Warn("rendering the network files without the stored addresses and VLANs", "err", err)
	}
	var vlans []network.VLANLink
	for _, r := range d.VLANs {
		vlans = append(vlans, network.VLANLink{Name: r.Name, Parent: r.Parent, Protocol: r.Protocol, ID: r.VLANID, Up: r.Enabled})
	}
	return network.Render(c, version, addrs, vlans)
}

// rerender writes the files again after a VLAN or address change, when
// the network is managed and no apply waits (a waiting apply's rollback
// puts its backup back; the next start renders again).
func (s *Service) rerender(ctx context.Context) {
	n := &s.net
	n.mu.Lock()
	defer n.mu.Unlock()
	cur, _, managed, err := s.loadDoc(ctx)
	if err != nil || !managed {
		return
	}
	if p, _, err := s.loadPending(ctx); err != nil || p != nil {
		return
	}
	want := s.render(ctx, cur, network.Version(cur))
	if have, err := network.ReadDir(s.deps.NetworkDir); err == nil && sameFiles(have, want) {
		return
	}
	if err := network.Check(want); err != nil {
		s.deps.Log.Error("rendered network files refused by the check; not written", "err", err)
		return
	}
	if err := network.WriteDir(s.deps.NetworkDir, want); err != nil {
		s.deps.Log.Error("writing the network files", "err", err)
	}
}

// rendered wraps a VLAN or address operation so that the files follow a
// successful change.
func rendered[Req, Resp any](s *Service, f func(context.Context, *Req) (*Resp, error)) func(context.Context, *Req) (*Resp, error) {
	return func(ctx context.Context, in *Req) (*Resp, error) {
		out, err := f(ctx, in)
		if err == nil {
			s.rerender(context.WithoutCancel(ctx))
		}
		return out, err
	}
}

// networkApply answers POST /network/apply.
func (s *Service) networkApply(ctx context.Context, in *api.NetworkChange) (*api.NetworkApplied, error) {
	if in.Version == "" {
		return nil, apierr.Invalid("version", "version is required: send the version GET /network gave")
	}
	n := &s.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fst == nil {
		return nil, apierr.Unavailable("netcfg is not serving (no host lock); try again")
	}
	if p, _, err := s.loadPending(ctx); err != nil {
		return nil, err
	} else if p != nil {
		left := max(time.UnixMilli(p.DeadlineMS).Sub(s.deps.Now()), 0)
		secs := int64((left + time.Second - 1) / time.Second)
		return nil, apierr.Conflict("an apply is waiting for confirm: %d s left (POST /network/confirm or /network/rollback)", secs).With("left_s", secs)
	}
	pl, err := s.plan(ctx, in)
	if err != nil {
		return nil, err
	}
	if len(pl.refused) > 0 {
		return nil, apierr.BadRequest("%s", strings.Join(pl.refused, "; ")).With("refused", pl.refused).With("problems", pl.refused)
	}
	// What a rollback needs, before anything changes: the kernel state of
	// every link the change may touch, and the rendered files.
	names := []string{}
	for _, c := range []api.NetConfig{pl.cur, pl.next} {
		for _, p := range c.Ports {
			names = append(names, p.Name)
		}
		for _, b := range c.Bonds {
			names = append(names, b.Name)
			names = append(names, b.Members...)
		}
	}
	snap, err := network.Snap(s.nl, names)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "the kernel's interfaces cannot be read")
	}
	backup, err := network.ReadDir(s.deps.NetworkDir)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "the OS network directory cannot be read")
	}
	now := s.deps.Now()
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	o := api.OriginOf(ctx)
	p := &Pending{ID: hex.EncodeToString(id), CreatedMS: now.UnixMilli(), DeadlineMS: now.Add(s.window()).UnixMilli(),
		By: o.String(), Previous: pl.cur, Next: pl.next, Changes: pl.changes, Snapshot: snap, Backup: backup}
	// On disk first, then in etcd with the document: a crash from here on
	// finds the way back in either.
	if err := s.writeDiskPending(p); err != nil {
		return nil, apierr.Internal(err.Error(), "the pending state cannot be written to disk; nothing applied")
	}
	if _, err := n.fst.Txn().IfRevision(s.docKey(), pl.rev).IfAbsent(s.pendingKey()).
		Put(s.docKey(), pl.next).Put(s.pendingKey(), p).Commit(ctx); err != nil {
		s.removeDiskPending()
		if errors.Is(err, store.ErrConflict) {
			return nil, apierr.Conflict("the network configuration changed meanwhile; read it again")
		}
		return nil, storeErr(err)
	}
	version := network.Version(pl.next)
	fail := func(step string, cause error) (*api.NetworkApplied, error) {
		s.deps.Log.Error("network apply failed: rolling back", "step", step, "err", cause)
		rerr := s.rollbackLocked(context.WithoutCancel(ctx), p, "failure")
		text := fmt.Sprintf("apply failed (%s): %v; files, document and kernel restored", step, cause)
		if rerr != nil {
			text = fmt.Sprintf("apply failed (%s): %v; the rollback did not finish: %v", step, cause, rerr)
		}
		return nil, apierr.Internal(cause.Error(), "%s", text)
	}
	files := s.render(ctx, pl.next, version)
	if err := network.Check(files); err != nil {
		return fail("check", err)
	}
	if err := network.WriteDir(s.deps.NetworkDir, files); err != nil {
		return fail("files", err)
	}
	kchanges, err := network.Apply(s.nl, pl.next)
	if err != nil {
		return fail("kernel", err)
	}
	s.relink(ctx, kchanges)
	s.armLocked(p)
	text := fmt.Sprintf("applied; confirm within %d s (POST /network/confirm) or it is rolled back", int(s.window()/time.Second))
	if a, err := s.autosave(ctx, "network apply "+version); err != nil {
		text += "; configuration version not saved: " + err.Error()
	} else {
		text += fmt.Sprintf("; configuration version %d saved", a.Version)
	}
	s.deps.Log.Info("network apply pending", "by", p.By, "changes", p.Changes, "deadline", time.UnixMilli(p.DeadlineMS))
	s.pub.Publish(api.NetworkPendingEvent, nil, map[string]any{"by": p.By, "changes": p.Changes, "deadline": p.DeadlineMS / 1000, "version": version})
	left := time.UnixMilli(p.DeadlineMS).Sub(s.deps.Now())
	return &api.NetworkApplied{RC: 0, Pending: int64(left.Round(time.Second) / time.Second), Deadline: p.DeadlineMS / 1000,
		Text: text, Changes: pl.changes, Version: version}, nil
}

// relink brings VLANs and addresses back after bonds were made or
// remade (a deleted bond takes its VLANs and addresses with it).
func (s *Service) relink(ctx context.Context, kchanges []string) {
	for _, c := range kchanges {
		if strings.HasPrefix(c, "link add ") || strings.HasPrefix(c, "link del ") {
			ch, probs, err := s.vlans.Reconcile(ctx)
			if err != nil || len(probs) > 0 {
				s.deps.Log.Warn("VLANs and addresses after a bond change", "err", err, "problems", probs)
			} else if len(ch) > 0 {
				s.deps.Log.Info("VLANs and addresses brought back after a bond change", "changes", ch)
			}
			return
		}
	}
}

func (s *Service) autosave(ctx context.Context, comment string) (*api.ConfigSaveAnswer, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	a, err := bus.Invoke(cctx, s.deps.NC, api.ConfigAutoSave, &api.ConfigAutoSaveRequest{Comment: comment})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// armLocked arms the process's timer for p's deadline. The timer is not
// the term's: it fires even while etcd or NATS is away (then it rolls the
// kernel and files back from the disk copy).
func (s *Service) armLocked(p *Pending) {
	if s.net.timer != nil {
		s.net.timer.Stop()
	}
	id := p.ID
	d := max(time.UnixMilli(p.DeadlineMS).Sub(s.deps.Now()), 0)
	s.net.timer = time.AfterFunc(d, func() { s.expire(id) })
}

func (s *Service) stopTimerLocked() {
	if s.net.timer != nil {
		s.net.timer.Stop()
		s.net.timer = nil
	}
}

// expire is the timer: the unconfirmed apply is rolled back.
func (s *Service) expire(id string) {
	n := &s.net
	n.mu.Lock()
	defer n.mu.Unlock()
	disk := s.diskPending()
	ctx := n.term
	if ctx != nil && ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		p, _, err := s.loadPending(cctx)
		cancel()
		if err == nil {
			if p == nil || p.ID != id {
				if disk != nil && disk.ID == id {
					s.removeDiskPending()
				}
				return // confirmed or rolled back elsewhere
			}
			if left := time.UnixMilli(p.DeadlineMS).Sub(s.deps.Now()); left > 0 {
				s.armLocked(p)
				return
			}
			if err := s.rollbackLocked(ctx, p, "timer"); err != nil {
				s.deps.Log.Error("rolling back the unconfirmed network apply", "err", err)
			}
			return
		}
		s.deps.Log.Error("etcd unreachable at the network apply's deadline: rolling back from the copy on disk", "err", err)
	}
	if disk == nil || disk.ID != id {
		return
	}
	if ctx == nil || ctx.Err() != nil {
		// No term: the lock went elsewhere or etcd is away. When etcd
		// answers, the lock's holder owns the deadline (it may have
		// confirmed meanwhile): only the disk copy of a settled apply goes.
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		p, _, err := s.loadPending(cctx)
		cancel()
		if err == nil {
			if p == nil || p.ID != id {
				s.removeDiskPending()
			} else {
				s.deps.Log.Info("network apply past its deadline while another replica holds the lock: left to it", "id", id)
			}
			return
		}
	}
	s.rollbackLocal(disk, "timer")
}

// rollbackLocal restores files and kernel from p alone (etcd away) and
// marks the disk copy so the next term finishes the store part.
func (s *Service) rollbackLocal(p *Pending, why string) {
	ferr := network.WriteDir(s.deps.NetworkDir, p.Backup)
	_, kerr := network.Apply(s.nl, p.Previous)
	rerr := network.Restore(s.nl, p.Snapshot)
	p.LocalDone, p.Why = true, why
	if err := s.writeDiskPending(p); err != nil {
		s.deps.Log.Error("marking the local rollback on disk", "err", err)
	}
	s.stopTimerLocked()
	s.deps.Log.Warn("network apply rolled back in the kernel and files; the stored document follows once etcd answers", "why", why,
		"files_err", ferr, "kernel_err", kerr, "restore_err", rerr)
}

// rollbackLocked restores files, kernel and stored document from p, and
// says so in an event.
func (s *Service) rollbackLocked(ctx context.Context, p *Pending, why string) error {
	var errs []error
	if err := network.WriteDir(s.deps.NetworkDir, p.Backup); err != nil {
		errs = append(errs, fmt.Errorf("files: %w", err))
	}
	kch, err := network.Apply(s.nl, p.Previous)
	if err != nil {
		errs = append(errs, fmt.Errorf("kernel: %w", err))
	}
	if err := network.Restore(s.nl, p.Snapshot); err != nil {
		errs = append(errs, fmt.Errorf("kernel state: %w", err))
	}
	s.relink(ctx, kch)
	if err := s.finishStore(ctx, p); err != nil {
		// Files and kernel are back; the store is not: keep the disk copy
		// marked so that the next term finishes.
		p.LocalDone, p.Why = true, why
		_ = s.writeDiskPending(p)
		errs = append(errs, fmt.Errorf("store: %w", err))
		s.stopTimerLocked()
		return errors.Join(errs...)
	}
	s.removeDiskPending()
	s.stopTimerLocked()
	s.deps.Log.Info("network apply rolled back", "why", why, "by", p.By, "changes", p.Changes)
	s.pub.Publish(api.NetworkRolledBackEvent, nil, map[string]any{"why": why, "by": p.By, "changes": p.Changes})
	return errors.Join(errs...)
}

// finishStore puts the previous document back and clears the pending
// record (only the one of p's id).
func (s *Service) finishStore(ctx context.Context, p *Pending) error {
	if s.net.fst == nil {
		return errors.New("not holding the host lock")
	}
	cur, rev, err := s.loadPending(ctx)
	if err != nil {
		return err
	}
	if cur == nil || cur.ID != p.ID {
		return nil
	}
	_, err = s.net.fst.Txn().IfRevision(s.pendingKey(), rev).Put(s.docKey(), p.Previous).Delete(s.pendingKey()).Commit(ctx)
	return err
}

// networkConfirm answers POST /network/confirm.
func (s *Service) networkConfirm(ctx context.Context, _ *api.None) (*api.NetworkDone, error) {
	n := &s.net
	n.mu.Lock()
	defer n.mu.Unlock()
	p, rev, err := s.loadPending(ctx)
	if err != nil {
		return nil, err
	}
	if p == nil || n.fst == nil {
		return nil, apierr.BadRequest("nothing is waiting for confirm").With("text", "nothing is waiting for confirm").With("rc", 1)
	}
	// Disk first: a crash between the two leaves the etcd record, and the
	// change is rolled back at start (nobody saw the confirm answered).
	s.removeDiskPending()
	if _, err := n.fst.Txn().IfRevision(s.pendingKey(), rev).Delete(s.pendingKey()).Commit(ctx); err != nil {
		_ = s.writeDiskPending(p)
		return nil, storeErr(err)
	}
	s.stopTimerLocked()
	by := api.OriginOf(ctx).String()
	s.deps.Log.Info("network apply confirmed", "by", by, "changes", p.Changes)
	s.pub.Publish(api.NetworkConfirmedEvent, nil, map[string]any{"by": by, "applied_by": p.By, "changes": p.Changes})
	return &api.NetworkDone{Text: "confirmed: the change stays", RC: 0}, nil
}

// networkRollback answers POST /network/rollback.
func (s *Service) networkRollback(ctx context.Context, _ *api.None) (*api.NetworkDone, error) {
	n := &s.net
	n.mu.Lock()
	defer n.mu.Unlock()
	p, _, err := s.loadPending(ctx)
	if err != nil {
		return nil, err
	}
	if p == nil || n.fst == nil {
		return nil, apierr.BadRequest("nothing is waiting for confirm").With("text", "nothing is waiting for confirm").With("rc", 1)
	}
	if err := s.rollbackLocked(ctx, p, "request"); err != nil {
		return nil, apierr.BadRequest("rollback failed: %v", err).With("text", "rollback failed: "+err.Error()).With("rc", 1)
	}
	return &api.NetworkDone{Text: "rolled back: files, document and kernel restored", RC: 0}, nil
}

// settleNetwork runs at the start of each term, before the links are
// reconciled: a pending apply found is rolled back (this process started
// after it was made: a crash or power cycle, nobody confirmed), or its
// deadline is taken over (a standby of this process taking the lock);
// then the stored document is applied to the kernel and the files.
func (s *Service) settleNetwork(ctx context.Context, fst *store.Store) error {
	n := &s.net
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fst, n.term = fst, ctx
	disk := s.diskPending()
	p, _, err := s.loadPending(ctx)
	if err != nil {
		return err
	}
	switch {
	case disk != nil && disk.LocalDone:
		if p != nil && p.ID == disk.ID {
			if err := s.finishStore(ctx, p); err != nil {
				return err
			}
		}
		s.removeDiskPending()
		s.deps.Log.Info("network apply rolled back (finished in the store)", "why", disk.Why, "by", disk.By)
		s.pub.Publish(api.NetworkRolledBackEvent, nil, map[string]any{"why": disk.Why, "by": disk.By, "changes": disk.Changes})
	case p != nil && time.UnixMilli(p.CreatedMS).Before(n.started):
		s.deps.Log.Warn("a network apply was waiting for confirm when routerd stopped: rolling it back", "by", p.By, "changes", p.Changes)
		if err := s.rollbackLocked(ctx, p, "restart"); err != nil {
			// Logged, not fatal: a routerd that cannot start helps nobody;
			// GET /network's drift shows what is left.
			s.deps.Log.Error("the rollback at start did not finish", "err", err)
		}
	case p != nil:
		if time.UnixMilli(p.DeadlineMS).After(s.deps.Now()) {
			if err := s.writeDiskPending(p); err != nil {
				s.deps.Log.Error("writing the pending network apply to disk", "err", err)
			}
			s.deps.Log.Info("took over a network apply waiting for confirm: timer armed", "left", time.UnixMilli(p.DeadlineMS).Sub(s.deps.Now()).Round(time.Second))
			s.armLocked(p)
			return nil // the applied document stays in force meanwhile
		}
		if err := s.rollbackLocked(ctx, p, "timer"); err != nil {
			s.deps.Log.Error("the rollback of an apply past its deadline did not finish", "err", err)
		}
	case disk != nil:
		// Written before an apply's etcd commit that never happened (or
		// left by a rollback between its two steps): the files are put
		// back as they were; the kernel was not touched.
		if err := network.WriteDir(s.deps.NetworkDir, disk.Backup); err != nil {
			s.deps.Log.Error("putting the network files back", "err", err)
		}
		s.removeDiskPending()
	}
	cur, _, managed, err := s.loadDoc(ctx)
	if err != nil || !managed {
		return err
	}
	ch, err := network.Apply(s.nl, cur)
	if err != nil {
		s.deps.Log.Error("the stored network document could not be applied to the kernel", "err", err)
	} else if len(ch) > 0 {
		s.deps.Log.Info("kernel brought to the stored network document", "changes", ch)
	}
	want := s.render(ctx, cur, network.Version(cur))
	if have, err := network.ReadDir(s.deps.NetworkDir); err == nil && !sameFiles(have, want) {
		if err := network.WriteDir(s.deps.NetworkDir, want); err != nil {
			s.deps.Log.Error("rendering the network files", "err", err)
		}
	}
	return nil
}

func sameFiles(a, b network.Files) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// endTerm forgets the term's store (the timer stays: it fires from the
// disk copy if no term has taken over by then).
func (s *Service) endTerm() {
	s.net.mu.Lock()
	s.net.fst, s.net.term = nil, nil
	s.net.mu.Unlock()
}

// networkAdopt answers POST /network/adopt.
func (s *Service) networkAdopt(ctx context.Context, in *api.NetworkAdopt) (*api.NetworkDoc, error) {
	n := &s.net
	n.mu.Lock()
	if n.fst == nil {
		n.mu.Unlock()
		return nil, apierr.Unavailable("netcfg is not serving (no host lock); try again")
	}
	kv, err := s.readKernel()
	if err != nil {
		n.mu.Unlock()
		return nil, apierr.Internal(err.Error(), "the kernel's interfaces cannot be read")
	}
	var c api.NetConfig
	want := map[string]bool{}
	for _, p := range in.Ports {
		want[p] = true
		l, ok := kv.byName[p]
		if !ok {
			n.mu.Unlock()
			return nil, apierr.NotFound("no such port: %s", p).With("field", "ports")
		}
		if k := network.Kind(l, kv.drivers[p]); k != "port" {
			n.mu.Unlock()
			return nil, apierr.Invalid("ports", "%s is a %s, not a port", p, k)
		}
	}
	for _, l := range kv.links {
		a := l.Attrs()
		if network.Kind(l, kv.drivers[a.Name]) != "port" || len(want) > 0 && !want[a.Name] {
			continue
		}
		port := api.NetPort{Name: a.Name, MAC: a.HardwareAddr.String(), Up: a.Flags&1 != 0}
		if a.MTU != network.DefaultMTU {
			m := a.MTU
			port.MTU = &m
		}
		c.Ports = append(c.Ports, port)
	}
	c = network.Normal(c)
	if _, err := n.fst.Txn().IfAbsent(s.docKey()).Put(s.docKey(), c).Commit(ctx); err != nil {
		n.mu.Unlock()
		if errors.Is(err, store.ErrConflict) {
			return nil, apierr.Conflict("a network configuration is stored already")
		}
		return nil, storeErr(err)
	}
	if err := network.WriteDir(s.deps.NetworkDir, s.render(ctx, c, network.Version(c))); err != nil {
		s.deps.Log.Error("rendering the network files", "err", err)
	}
	n.mu.Unlock()
	d, err := s.networkGet(ctx, nil)
	if err != nil {
		return nil, err
	}
	d.Message = fmt.Sprintf("network configuration stored: %d ports", len(c.Ports))
	return d, nil
}

// storeErr turns a store failure into its API kind.
func storeErr(err error) error {
	switch {
	case errors.Is(err, store.ErrLockLost):
		return apierr.Unavailable("netcfg lost its host lock; try again")
	case errors.Is(err, store.ErrConflict):
		return apierr.Conflict("the network configuration changed meanwhile; try again")
	}
	return err
}

// protoName is a route protocol as `ip route` names it.
func protoName(p netlink.RouteProtocol) string {
	switch int(p) {
	case 2:
		return "kernel"
	case 3:
		return "boot"
	case 4:
		return "static"
	case 16:
		return "dhcp"
	case kernel.BIRDRouteProtocol:
		return "bird"
	case kernel.NetcfgRouteProtocol:
		return kernel.NetcfgRouteProtocolName
	case kernel.DHCPRouteProtocol:
		return kernel.DHCPRouteProtocolName
	}
	return fmt.Sprint(int(p))
}

// defaults lists the kernel's default routes (main table).
func (s *Service) defaults(kv *kernelView) ([]api.NetRoute, error) {
	out := []api.NetRoute{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := link.Dump(func() ([]netlink.Route, error) { return s.nl.RouteList(nil, fam) })
		if err != nil {
			return nil, fmt.Errorf("listing routes: %w", err)
		}
		for _, r := range rs {
			if r.Dst != nil {
				if ones, _ := r.Dst.Mask.Size(); ones != 0 {
					continue
				}
			}
			to := "default"
			if fam == netlink.FAMILY_V6 {
				to = "default (IPv6)"
			}
			nr := api.NetRoute{To: to, Protocol: protoName(r.Protocol), Metric: r.Priority}
			if r.Gw != nil {
				nr.Via = r.Gw.String()
			}
			if l, ok := kv.byIndex[r.LinkIndex]; ok {
				nr.Dev = l.Attrs().Name
			}
			for _, nh := range r.MultiPath {
				if l, ok := kv.byIndex[nh.LinkIndex]; ok && nr.Dev == "" {
					nr.Dev = l.Attrs().Name
					if nh.Gw != nil {
						nr.Via = nh.Gw.String()
					}
				}
			}
			out = append(out, nr)
		}
	}
	return out, nil
}

// networkGet answers GET /network.
func (s *Service) networkGet(ctx context.Context, _ *api.None) (*api.NetworkDoc, error) {
	cur, _, managed, err := s.loadDoc(ctx)
	if err != nil {
		return nil, err
	}
	kv, err := s.readKernel()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "the kernel's interfaces cannot be read")
	}
	_, vd, err := s.storedAddrs(ctx)
	if err != nil {
		return nil, err
	}
	defs, err := s.defaults(kv)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "the kernel's routes cannot be read")
	}
	d := &api.NetworkDoc{Generated: s.deps.Now().Format(vlan.TimeLayout), Managed: managed, Config: cur,
		Uplinks: []string{}, Interfaces: []api.NetIfaceRecord{}, Addresses: []api.NetAddrRecord{}, ServiceVLANs: []api.ServiceVLAN{},
		Routes: api.NetRoutes{DefaultKernel: defs, Static: []api.Route{}}, Drift: []string{}}
	if managed {
		d.Version = network.Version(cur)
	}
	for _, r := range defs {
		if r.Dev != "" {
			d.Uplinks = appendOnce(d.Uplinks, r.Dev)
		}
	}
	sort.Strings(d.Uplinks)
	if managed, err := s.routes.Managed(ctx); err == nil {
		for _, r := range managed {
			d.Routes.Static = append(d.Routes.Static, api.Route(r))
		}
	}
	shaped := map[string]bool{}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	if st, err := bus.Invoke(sctx, s.deps.NC, api.ShaperStatus, &api.None{}); err == nil {
		for _, i := range st.Ifaces {
			shaped[i.Name] = true
			if i.Ifb != "" {
				shaped[i.Ifb] = true
			}
		}
	}
	cancel()
	ports := map[string]api.NetPort{}
	for _, p := range cur.Ports {
		ports[p.Name] = p
	}
	bonds := map[string]api.NetBond{}
	for _, b := range cur.Bonds {
		bonds[b.Name] = b
	}
	vlans := map[string]vlan.Record{}
	for _, r := range vd.VLANs {
		vlans[r.Name] = r
	}
	// Stored addresses by interface, with where they are configured.
	type src struct{ iface, cidr, source string }
	stored := map[string]string{} // iface|cidr -> source
	for _, r := range vd.VLANs {
		for _, a := range append(append([]string{}, r.IPs...), r.IPs6...) {
			stored[r.Name+"|"+a] = "vlans"
		}
	}
	for _, a := range vd.Addresses {
		stored[a.Iface+"|"+a.CIDR] = "ports"
	}
	live := map[string]bool{}
	for _, l := range kv.links {
		a := l.Attrs()
		kind := network.Kind(l, kv.drivers[a.Name])
		if kind == "loopback" {
			kind = "other"
		}
		rec := api.NetIfaceRecord{Name: a.Name, Kind: kind, MAC: a.HardwareAddr.String(), MTU: a.MTU, Up: a.Flags&1 != 0,
			Carrier: a.RawFlags&0x10000 != 0, Driver: kv.drivers[a.Name], Addresses: []string{}, Shapes: shaped[a.Name]}
		if m, ok := kv.byIndex[a.MasterIndex]; ok && a.MasterIndex != 0 {
			rec.Master = m.Attrs().Name
		}
		if p, ok := kv.byIndex[a.ParentIndex]; ok && a.ParentIndex != 0 && a.ParentIndex != a.Index {
			rec.Parent = p.Attrs().Name
		}
		switch v := l.(type) {
		case *netlink.Vlan:
			id, proto := v.VlanId, link.Dot1Q
			if v.VlanProtocol == netlink.VLAN_PROTOCOL_8021AD {
				proto = link.Dot1AD
			}
			rec.VID, rec.Protocol = &id, &proto
		case *netlink.Bond:
			m := v.Mode.String()
			rec.BondMode = &m
		}
		if kind == "port" || kind == "bond" {
			rec.SpeedMbps = s.net.eth.Speed(a.Name)
		}
		switch {
		case a.Alias == link.Alias:
			rec.Owner = "vlans"
		case a.Alias == network.BondAlias:
			rec.Owner = "network"
		case strings.HasPrefix(a.Alias, kernel.LinkAliasPrefix+"shaper"):
			rec.Owner = "shaper"
		case strings.HasPrefix(a.Alias, kernel.LinkAliasPrefix):
			rec.Owner = "services"
		}
		if _, ok := ports[a.Name]; ok && rec.Owner == "" {
			rec.Owner = "network"
		}
		_, inPorts := ports[a.Name]
		_, inBonds := bonds[a.Name]
		_, inVLANs := vlans[a.Name]
		rec.Configured = inPorts || inBonds || inVLANs
		for _, r := range defs {
			if r.Dev == a.Name {
				rec.Uplink = true
			}
		}
		for _, ad := range kv.addrs[a.Name] {
			p, ok := globalAddr(ad)
			if !ok {
				continue
			}
			rec.Addresses = append(rec.Addresses, p.String())
			key := a.Name + "|" + p.String()
			live[key] = true
			source, configured := stored[key]
			if !configured {
				source = "kernel"
			}
			fam := 4
			if p.Addr().Is6() {
				fam = 6
			}
			d.Addresses = append(d.Addresses, api.NetAddrRecord{Iface: a.Name, CIDR: p.String(), Family: fam, Source: source,
				Configured: configured, Live: true, Dynamic: ad.Flags&unix.IFA_F_PERMANENT == 0})
		}
		d.Interfaces = append(d.Interfaces, rec)
	}
	for key, source := range stored {
		if live[key] {
			continue
		}
		iface, cidr, _ := strings.Cut(key, "|")
		fam := 4
		if strings.Contains(cidr, ":") {
			fam = 6
		}
		d.Addresses = append(d.Addresses, api.NetAddrRecord{Iface: iface, CIDR: cidr, Family: fam, Source: source, Configured: true})
		if r, ok := vlans[iface]; !ok || r.Enabled {
			d.Drift = append(d.Drift, fmt.Sprintf("address %s on %s is configured but not in the kernel", cidr, iface))
		}
	}
	sort.Slice(d.Addresses, func(i, j int) bool {
		if d.Addresses[i].Iface != d.Addresses[j].Iface {
			return d.Addresses[i].Iface < d.Addresses[j].Iface
		}
		return d.Addresses[i].CIDR < d.Addresses[j].CIDR
	})
	sort.Slice(d.Interfaces, func(i, j int) bool { return d.Interfaces[i].Name < d.Interfaces[j].Name })
	d.Drift = append(d.Drift, drift(cur, kv, vd)...)
	sort.Strings(d.Drift)
	if p, _, err := s.loadPending(ctx); err == nil && p != nil {
		left := max(time.UnixMilli(p.DeadlineMS).Sub(s.deps.Now()), 0)
		d.Pending = &api.NetPending{Deadline: p.DeadlineMS / 1000, LeftS: int64((left + time.Second - 1) / time.Second), By: p.By}
	}
	return d, nil
}

// drift says, in an operator's words, where the kernel differs from the
// stored ports, bonds and VLANs.
func drift(c api.NetConfig, kv *kernelView, vd vlan.Document) []string {
	var out []string
	members := network.Members(c)
	for _, p := range c.Ports {
		l, ok := kv.byName[p.Name]
		if !ok {
			out = append(out, fmt.Sprintf("port %s is configured but the kernel has no such interface", p.Name))
			continue
		}
		a := l.Attrs()
		if up := a.Flags&1 != 0; up != p.Up {
			out = append(out, fmt.Sprintf("port %s is configured %s but is %s in the kernel", p.Name, updown(p.Up), updown(up)))
		}
		want := network.DefaultMTU
		if p.MTU != nil {
			want = *p.MTU
		}
		if _, member := members[p.Name]; !member && a.MTU != want {
			out = append(out, fmt.Sprintf("port %s has MTU %d in the kernel, %d configured", p.Name, a.MTU, want))
		}
		master := ""
		if m, ok := kv.byIndex[a.MasterIndex]; ok && a.MasterIndex != 0 {
			master = m.Attrs().Name
		}
		if b := members[p.Name]; b != master {
			if b == "" {
				out = append(out, fmt.Sprintf("port %s is enslaved to %s in the kernel but configured outside any bond", p.Name, master))
			} else {
				out = append(out, fmt.Sprintf("port %s is configured as a member of %s but is not in it in the kernel", p.Name, b))
			}
		}
		if p.MAC != "" && !strings.EqualFold(p.MAC, a.HardwareAddr.String()) && members[p.Name] == "" {
			out = append(out, fmt.Sprintf("port %s has MAC %s in the kernel, %s configured (a replaced card?)", p.Name, a.HardwareAddr, p.MAC))
		}
	}
	for _, b := range c.Bonds {
		l, ok := kv.byName[b.Name]
		if !ok {
			out = append(out, fmt.Sprintf("bond %s is configured but missing from the kernel", b.Name))
			continue
		}
		if bl, ok := l.(*netlink.Bond); !ok {
			out = append(out, fmt.Sprintf("%s is configured as a bond but is not one in the kernel", b.Name))
		} else if bl.Mode.String() != b.Mode {
			out = append(out, fmt.Sprintf("bond %s runs mode %s, %s configured", b.Name, bl.Mode, b.Mode))
		}
	}
	for _, r := range vd.VLANs {
		l, ok := kv.byName[r.Name]
		if !ok {
			out = append(out, fmt.Sprintf("VLAN %s is configured but missing from the kernel", r.Name))
			continue
		}
		if up := l.Attrs().Flags&1 != 0; up != r.Enabled {
			out = append(out, fmt.Sprintf("VLAN %s is configured %s but is %s in the kernel", r.Name, map[bool]string{true: "enabled", false: "disabled"}[r.Enabled], updown(up)))
		}
	}
	return out
}

func updown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}
