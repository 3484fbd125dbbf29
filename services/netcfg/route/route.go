// Package route keeps the router's static routes: validated, persisted in
// etcd, then applied to the kernel of the target namespace through netlink
// with netcfg's own route protocol (kernel.NetcfgRouteProtocol), and
// reconciled both ways when the service starts. The store is written first,
// so a crash between the two writes leaves either a stored route the kernel
// lacks or a kernel route of netcfg's protocol the store lacks, and
// Reconcile repairs both. All changes go through one lock, so two requests
// never interleave their store and apply.
package route

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Route is one managed static route.
type Route struct {
	// Prefix is a CIDR, or "default".
	Prefix string `json:"prefix"`
	Via    string `json:"via"`
	Dev    string `json:"dev"`
	// Family is "ipv4" or "ipv6".
	Family  string `json:"family"`
	Comment string `json:"comment"`
	Created string `json:"created"`
}

// TimeLayout is how timestamps are written in answers.
const TimeLayout = "2006-01-02 15:04:05"

// MaxComment bounds a route's comment.
const MaxComment = 200

// Protocol marks the routes netcfg installs (kernel.NetcfgRouteProtocol,
// listed as "proto routerd"). netcfg owns exactly the routes of the main
// table that carry it: Reconcile removes those it has not stored, and never
// changes a route of any other protocol (the operator's "proto static", the
// kernel's, dhcp's delegated routes).
const Protocol netlink.RouteProtocol = kernel.NetcfgRouteProtocol

var devPattern = regexp.MustCompile(`^[A-Za-z0-9_.@:-]{1,15}$`)

// Input is an add request, before validation.
type Input struct {
	Prefix, Via, Dev, Comment string
}

// spec is a validated route in kernel terms.
type spec struct {
	dst    *net.IPNet // nil for default
	via    net.IP
	dev    string
	family int
}

// parse validates in and resolves it against the links of the namespace.
func parse(in Input) (Route, spec, error) {
	var r Route
	var s spec
	prefix := strings.TrimSpace(in.Prefix)
	via := strings.TrimSpace(in.Via)
	dev := strings.TrimSpace(in.Dev)
	if prefix == "" {
		return r, s, apierr.Invalid("prefix", "prefix is required (CIDR or default)")
	}
	if via == "" && dev == "" {
		return r, s, apierr.Invalid("via", "via and/or dev is required")
	}
	var viaAddr netip.Addr
	if via != "" {
		a, err := netip.ParseAddr(via)
		if err != nil || a.Zone() != "" {
			return r, s, apierr.Invalid("via", "invalid gateway %q", via)
		}
		viaAddr = a.Unmap()
		s.via = net.IP(viaAddr.AsSlice())
	}
	switch {
	case strings.EqualFold(prefix, "default"):
		prefix = "default"
		s.family = unix.AF_INET
		if viaAddr.Is6() {
			s.family = unix.AF_INET6
		}
	default:
		p, err := netip.ParsePrefix(prefix)
		if err != nil {
			a, aerr := netip.ParseAddr(prefix)
			if aerr != nil {
				return r, s, apierr.Invalid("prefix", "invalid prefix %q: want CIDR or default", prefix)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Zone() != "" {
			return r, s, apierr.Invalid("prefix", "invalid prefix %q", prefix)
		}
		if m := p.Masked(); m != p {
			return r, s, apierr.Invalid("prefix", "prefix %s has host bits set; did you mean %s?", p, m)
		}
		prefix = p.String()
		s.family = unix.AF_INET
		if p.Addr().Is6() {
			s.family = unix.AF_INET6
		}
		s.dst = &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
		if p.Bits() == 0 {
			prefix = "default"
			s.dst = nil
		}
	}
	if viaAddr.IsValid() && (viaAddr.Is6() != (s.family == unix.AF_INET6)) {
		return r, s, apierr.Invalid("via", "gateway %s is not of the prefix's family", via)
	}
	if viaAddr.IsValid() && (viaAddr.IsUnspecified() || viaAddr.IsMulticast()) {
		return r, s, apierr.Invalid("via", "gateway %s cannot be a next hop", via)
	}
	if viaAddr.IsValid() && viaAddr.Is6() && viaAddr.IsLinkLocalUnicast() && dev == "" {
		return r, s, apierr.Invalid("dev", "a link-local gateway needs dev")
	}
	if dev != "" && !devPattern.MatchString(dev) {
		return r, s, apierr.Invalid("dev", "invalid interface name %q", dev)
	}
	if len(in.Comment) > MaxComment {
		return r, s, apierr.Invalid("comment", "comment longer than %d characters", MaxComment)
	}
	s.dev = dev
	fam := "ipv4"
	if s.family == unix.AF_INET6 {
		fam = "ipv6"
	}
	if viaAddr.IsValid() {
		via = viaAddr.String()
	}
	r = Route{Prefix: prefix, Via: via, Dev: dev, Family: fam, Comment: in.Comment}
	return r, s, nil
}

// id is the etcd key segment of a route: its identity is prefix, via, dev.
func id(r Route) string {
	rep := strings.NewReplacer("/", "_", ":", "-")
	return rep.Replace(r.Prefix) + "~" + rep.Replace(r.Via) + "~" + r.Dev
}

// Table is the managed route table of one namespace.
type Table struct {
	mu  sync.Mutex // the one writer of routes in this namespace
	st  atomic.Pointer[store.Store]
	nl  *netlink.Handle
	now func() time.Time
}

// NewTable manages routes in the namespace nl is bound to, storing them
// through st until Use hands it another store.
func NewTable(st *store.Store, nl *netlink.Handle, now func() time.Time) *Table {
	if now == nil {
		now = time.Now
	}
	t := &Table{nl: nl, now: now}
	t.st.Store(st)
	return t
}

// Use makes the table read and write etcd through st from now on: the
// service hands it the store fenced by its host lock (store.Fenced) each
// time it takes the lock, so that after the lock is lost no write of this
// table reaches etcd.
func (t *Table) Use(st *store.Store) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Store(st)
}

func (t *Table) store() *store.Store { return t.st.Load() }

func (t *Table) key(r Route) string { return t.store().Key("routes", id(r)) }

// Managed lists the stored routes in the order they were created.
func (t *Table) Managed(ctx context.Context) ([]Route, error) {
	st := t.store()
	items, err := store.List[Route](ctx, st, st.Key("routes")+"/")
	if err != nil {
		return nil, err
	}
	out := make([]Route, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created < out[j].Created })
	return out, nil
}

// Add validates and stores the route, then installs it in the kernel. A
// route the kernel already has exactly (of whatever protocol) is only
// stored. When the kernel refuses the route the stored record is removed
// again, so a failed add leaves nothing behind.
func (t *Table) Add(ctx context.Context, in Input) (Route, error) {
	r, s, err := parse(in)
	if err != nil {
		return r, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st, key := t.store(), t.key(r)
	if _, _, err := store.Get[Route](ctx, st, key); err == nil {
		return r, apierr.Conflict("route %s already managed", describe(r)).With("field", "prefix")
	} else if !errors.Is(err, store.ErrNotFound) {
		return r, err
	}
	kr, err := t.kernelRoute(s)
	if err != nil {
		return r, err
	}
	existed, err := t.present(kr)
	if err != nil {
		return r, apierr.Internal(err.Error(), "cannot read the kernel's routes")
	}
	r.Created = t.now().Format(TimeLayout)
	rev, err := st.Txn().IfAbsent(key).Put(key, r).Commit(ctx)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return r, apierr.Conflict("route %s already managed", describe(r))
		}
		return r, storeError(err, "storing route %s", describe(r))
	}
	if existed {
		return r, nil
	}
	if err := t.nl.RouteAdd(kr); err != nil {
		// Undone even when ctx has ended: the record must not outlive the refusal.
		if _, uerr := st.Txn().IfRevision(key, rev).Delete(key).Commit(context.WithoutCancel(ctx)); uerr != nil {
			return r, apierr.Internal(fmt.Sprintf("%v; removing the stored record failed too: %v", err, uerr),
				"kernel refused route %s: %v", describe(r), err)
		}
		return r, apierr.Internal(err.Error(), "kernel refused route %s: %v", describe(r), err)
	}
	return r, nil
}

// Delete removes the first managed route with prefix, narrowed by via and
// dev when given: from the store, then from the kernel. kernelRemoved is
// false when the kernel no longer had it as netcfg's (a route of another
// protocol with the same destination is left alone).
func (t *Table) Delete(ctx context.Context, prefix, via, dev string) (r Route, kernelRemoved bool, err error) {
	if strings.TrimSpace(prefix) == "" {
		return r, false, apierr.Invalid("prefix", "prefix is required")
	}
	want, _, perr := parse(Input{Prefix: prefix, Via: via, Dev: dev})
	if perr != nil && !(via == "" && dev == "") {
		return r, false, perr
	}
	if perr != nil { // only a prefix was given: normalise it alone
		if want, _, perr = parse(Input{Prefix: prefix, Dev: "x"}); perr != nil {
			return r, false, perr
		}
		want.Via, want.Dev = "", ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	managed, err := t.Managed(ctx)
	if err != nil {
		return r, false, err
	}
	found := false
	for _, m := range managed {
		if m.Prefix == want.Prefix && (via == "" || m.Via == want.Via) && (dev == "" || m.Dev == dev) {
			r, found = m, true
			break
		}
	}
	if !found {
		return r, false, apierr.NotFound("route %s not managed", prefix)
	}
	st, key := t.store(), t.key(r)
	if _, err := st.Txn().Delete(key).Commit(ctx); err != nil {
		return r, false, storeError(err, "removing route %s from the store", describe(r))
	}
	_, s, err := parse(Input{Prefix: r.Prefix, Via: r.Via, Dev: r.Dev})
	if err != nil {
		return r, false, nil // stored but no longer valid: nothing of it can be in the kernel
	}
	kr, err := t.kernelRoute(s)
	if err != nil {
		return r, false, nil // its interface is gone, and the kernel dropped the route with it
	}
	// The kernel matches the protocol too, so only netcfg's route goes.
	if err := t.nl.RouteDel(kr); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return r, false, nil
		}
		if _, uerr := st.Txn().IfAbsent(key).Put(key, r).Commit(context.WithoutCancel(ctx)); uerr != nil {
			return r, false, apierr.Internal(fmt.Sprintf("%v; storing the route again failed too: %v", err, uerr),
				"kernel refused to remove route %s: %v", describe(r), err)
		}
		return r, false, apierr.Internal(err.Error(), "kernel refused to remove route %s: %v", describe(r), err)
	}
	return r, true, nil
}

// storeError makes a failed store write an API error: a lost host lock is
// 503 (another replica serves now, the caller may retry there), anything
// else wrapped for a 500.
func storeError(err error, format string, a ...any) error {
	what := fmt.Sprintf(format, a...)
	if errors.Is(err, store.ErrLockLost) {
		return apierr.Unavailable("netcfg lost this host's lock to another replica; %s refused, nothing changed", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Reconciled is what one Reconcile did.
type Reconciled struct {
	// Added are stored routes the kernel lacked, put back.
	Added []string `json:"added"`
	// Removed are kernel routes of netcfg's protocol that are not stored
	// (left by a crash between the store and the kernel write), taken out.
	Removed []string `json:"removed"`
	// Problems are what could not be reconciled (an interface that is gone,
	// a route the kernel refused); the rest is done regardless.
	Problems []string `json:"problems"`
}

// Reconcile makes the kernel's routes of netcfg's protocol what the store
// says, both ways: kernel routes of that protocol the store does not have
// are removed, then stored routes the kernel lacks are added. Routes of any
// other protocol are never changed, and a stored route the kernel already
// has under another protocol counts as present. Applying twice changes
// nothing the second time.
func (t *Table) Reconcile(ctx context.Context) (Reconciled, error) {
	var res Reconciled
	t.mu.Lock()
	defer t.mu.Unlock()
	managed, err := t.Managed(ctx)
	if err != nil {
		return res, err
	}
	type wanted struct {
		r  Route
		kr *netlink.Route
	}
	var want []wanted
	for _, r := range managed {
		_, s, err := parse(Input{Prefix: r.Prefix, Via: r.Via, Dev: r.Dev})
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: %v", describe(r), err))
			continue
		}
		kr, err := t.kernelRoute(s)
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: %v", describe(r), err))
			continue
		}
		want = append(want, wanted{r, kr})
	}

	// Removals first, so a stale route cannot block the stored one that
	// replaces it (same destination, another gateway).
	names := t.linkNames()
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		ours, err := t.nl.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN, Protocol: Protocol},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return res, fmt.Errorf("listing the kernel's routes: %w", err)
		}
		for _, x := range ours {
			stored := false
			for _, w := range want {
				if matches(w.kr, x) {
					stored = true
					break
				}
			}
			if stored {
				continue
			}
			if err := ctx.Err(); err != nil {
				return res, err
			}
			line := render(x, names)
			if err := t.nl.RouteDel(&x); err != nil && !errors.Is(err, unix.ESRCH) {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: kernel refused to remove it: %v", line, err))
				continue
			}
			res.Removed = append(res.Removed, line)
		}
	}

	for _, w := range want {
		if ok, err := t.present(w.kr); err != nil {
			return res, fmt.Errorf("listing the kernel's routes: %w", err)
		} else if ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := t.nl.RouteAdd(w.kr); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: kernel refused: %v", describe(w.r), err))
			continue
		}
		res.Added = append(res.Added, describe(w.r))
	}
	return res, nil
}

// kernelRoute resolves the device and builds the netlink route.
func (t *Table) kernelRoute(s spec) (*netlink.Route, error) {
	kr := &netlink.Route{Dst: s.dst, Gw: s.via, Family: s.family, Protocol: Protocol, Table: unix.RT_TABLE_MAIN}
	if s.dev != "" {
		link, err := t.nl.LinkByName(s.dev)
		if err != nil {
			return nil, apierr.Invalid("dev", "interface %s not found", s.dev)
		}
		kr.LinkIndex = link.Attrs().Index
	}
	if s.via == nil {
		kr.Scope = netlink.SCOPE_LINK
	}
	return kr, nil
}

// present reports whether the kernel's main table has this route, of any
// protocol.
func (t *Table) present(kr *netlink.Route) (bool, error) {
	filter := &netlink.Route{Dst: kr.Dst, Table: unix.RT_TABLE_MAIN}
	mask := netlink.RT_FILTER_DST | netlink.RT_FILTER_TABLE
	if kr.Dst == nil {
		mask = netlink.RT_FILTER_TABLE
	}
	routes, err := t.nl.RouteListFiltered(kr.Family, filter, mask)
	if err != nil {
		return false, err
	}
	for _, x := range routes {
		if matches(kr, x) {
			return true, nil
		}
	}
	return false, nil
}

// matches reports whether the kernel route x is the route kr would install:
// same destination and gateway, and same interface when kr names one.
// Protocol, metric and scope are not compared.
func matches(kr *netlink.Route, x netlink.Route) bool {
	if !sameDst(kr.Dst, x.Dst) {
		return false
	}
	if kr.Gw != nil && !kr.Gw.Equal(x.Gw) {
		return false
	}
	if kr.Gw == nil && x.Gw != nil {
		return false
	}
	return kr.LinkIndex == 0 || kr.LinkIndex == x.LinkIndex
}

func sameDst(a, b *net.IPNet) bool {
	if a == nil || isDefault(a) {
		return b == nil || isDefault(b)
	}
	if b == nil || isDefault(b) {
		return false
	}
	ao, _ := a.Mask.Size()
	bo, _ := b.Mask.Size()
	return ao == bo && a.IP.Equal(b.IP)
}

func isDefault(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0
}

func describe(r Route) string {
	s := r.Prefix
	if r.Via != "" {
		s += " via " + r.Via
	}
	if r.Dev != "" {
		s += " dev " + r.Dev
	}
	return s
}
