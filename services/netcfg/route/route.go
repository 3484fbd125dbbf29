// Package route keeps the router's static routes: validated, applied to the
// kernel of the target namespace through netlink, persisted in etcd, and
// restored into the kernel when the service starts. All kernel changes go
// through one lock, so two requests never interleave their apply and store.
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
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

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

// Protocol marks routes this router installs (RTPROT_STATIC), so the live
// listing shows "proto static" for them.
const Protocol = unix.RTPROT_STATIC

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
	st  *store.Store
	nl  *netlink.Handle
	now func() time.Time
}

// NewTable manages routes in the namespace nl is bound to.
func NewTable(st *store.Store, nl *netlink.Handle, now func() time.Time) *Table {
	if now == nil {
		now = time.Now
	}
	return &Table{st: st, nl: nl, now: now}
}

func (t *Table) key(r Route) string { return t.st.Key("routes", id(r)) }

// Managed lists the stored routes in the order they were created.
func (t *Table) Managed(ctx context.Context) ([]Route, error) {
	items, err := store.List[Route](ctx, t.st, t.st.Key("routes")+"/")
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

// Add validates, installs the route in the kernel and stores it. A route the
// kernel already has exactly is only stored. When storing fails the kernel
// route is taken out again, so a failed add leaves nothing behind.
func (t *Table) Add(ctx context.Context, in Input) (Route, error) {
	r, s, err := parse(in)
	if err != nil {
		return r, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, _, err := store.Get[Route](ctx, t.st, t.key(r)); err == nil {
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
	if !existed {
		if err := t.nl.RouteAdd(kr); err != nil {
			return r, apierr.Internal(err.Error(), "kernel refused route %s: %v", describe(r), err)
		}
	}
	r.Created = t.now().Format(TimeLayout)
	if _, err := t.st.Txn().IfAbsent(t.key(r)).Put(t.key(r), r).Commit(ctx); err != nil {
		if !existed {
			_ = t.nl.RouteDel(kr)
		}
		if errors.Is(err, store.ErrConflict) {
			return r, apierr.Conflict("route %s already managed", describe(r))
		}
		return r, fmt.Errorf("storing route %s (kernel change undone): %w", describe(r), err)
	}
	return r, nil
}

// Delete removes the first managed route with prefix, narrowed by via and
// dev when given. kernelRemoved is false when the kernel no longer had it.
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
	_, s, err := parse(Input{Prefix: r.Prefix, Via: r.Via, Dev: r.Dev})
	if err != nil {
		return r, false, err
	}
	kr, kerr := t.kernelRoute(s)
	if kerr == nil {
		if present, _ := t.present(kr); present {
			if err := t.nl.RouteDel(kr); err != nil {
				return r, false, apierr.Internal(err.Error(), "kernel refused to remove route %s: %v", describe(r), err)
			}
			kernelRemoved = true
		}
	}
	if _, err := t.st.Txn().Delete(t.key(r)).Commit(ctx); err != nil {
		if kernelRemoved {
			_ = t.nl.RouteAdd(kr)
		}
		return r, false, fmt.Errorf("removing route %s from the store (kernel change undone): %w", describe(r), err)
	}
	return r, kernelRemoved, nil
}

// Restore puts every stored route back into the kernel; routes already
// there are left alone, so restoring twice changes nothing. It returns what
// it could not restore (e.g. the interface is gone) without failing.
func (t *Table) Restore(ctx context.Context) (restored int, problems []string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	managed, err := t.Managed(ctx)
	if err != nil {
		return 0, nil, err
	}
	for _, r := range managed {
		_, s, err := parse(Input{Prefix: r.Prefix, Via: r.Via, Dev: r.Dev})
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", describe(r), err))
			continue
		}
		kr, err := t.kernelRoute(s)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", describe(r), err))
			continue
		}
		if ok, _ := t.present(kr); ok {
			continue
		}
		if err := t.nl.RouteAdd(kr); err != nil {
			problems = append(problems, fmt.Sprintf("%s: kernel refused: %v", describe(r), err))
			continue
		}
		restored++
	}
	return restored, problems, nil
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

// present reports whether the kernel's main table has this exact route.
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
		if kr.Dst == nil && x.Dst != nil && !isDefault(x.Dst) {
			continue
		}
		if kr.Gw != nil && !kr.Gw.Equal(x.Gw) {
			continue
		}
		if kr.Gw == nil && x.Gw != nil {
			continue
		}
		if kr.LinkIndex != 0 && kr.LinkIndex != x.LinkIndex {
			continue
		}
		return true, nil
	}
	return false, nil
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
