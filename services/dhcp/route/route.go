// Package route installs and withdraws the route of each delegated prefix
// (prefix via the client's address on its interface) in the target
// namespace, and reconciles the kernel against the leases: the work behind
// the spec's /pd/sync.
package route

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// Protocol marks the routes this package owns (rtnetlink protocol number,
// kernel.DHCPRouteProtocol), so the reconciler never touches a route
// someone else installed.
const Protocol netlink.RouteProtocol = kernel.DHCPRouteProtocol

// Want is one delegated prefix's route.
type Want struct {
	Prefix netip.Prefix
	Via    netip.Addr
	Iface  string
}

func (w Want) String() string { return fmt.Sprintf("%v via %v dev %s", w.Prefix, w.Via, w.Iface) }

// Manager changes routes through one netlink handle bound to the target
// namespace; its lock is the one writer of delegated routes.
type Manager struct {
	mu sync.Mutex
	h  *netlink.Handle
	// installed remembers what this manager put in the kernel, so a renewal
	// that changes nothing costs no netlink round trip; Sync re-reads the
	// kernel and repairs anything changed behind its back.
	installed map[netip.Prefix]Want
	links     map[string]int
}

// New returns a manager on h (from netlink.NewHandleAt).
func New(h *netlink.Handle) *Manager {
	return &Manager{h: h, installed: map[netip.Prefix]Want{}, links: map[string]int{}}
}

func (m *Manager) route(w Want) (*netlink.Route, error) {
	idx, ok := m.links[w.Iface]
	if !ok {
		link, err := m.h.LinkByName(w.Iface)
		if err != nil {
			return nil, fmt.Errorf("route %v: %w", w, err)
		}
		idx = link.Attrs().Index
		m.links[w.Iface] = idx
	}
	return &netlink.Route{
		LinkIndex: idx,
		Dst:       &net.IPNet{IP: w.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(w.Prefix.Bits(), 128)},
		Gw:        w.Via.WithZone("").AsSlice(),
		Protocol:  Protocol,
		Family:    netlink.FAMILY_V6,
	}, nil
}

// Add installs (or moves) the route of w.
func (m *Manager) Add(w Want) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.Via = w.Via.WithZone("")
	if m.installed[w.Prefix] == w {
		return nil
	}
	r, err := m.route(w)
	if err != nil {
		return err
	}
	if err := m.h.RouteReplace(r); err != nil {
		delete(m.links, w.Iface) // the interface may have been recreated
		return err
	}
	m.installed[w.Prefix] = w
	return nil
}

// Del withdraws the route of prefix; a route already gone is not an error.
func (m *Manager) Del(p netip.Prefix) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.installed, p)
	err := m.h.RouteDel(&netlink.Route{
		Dst:      &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)},
		Protocol: Protocol, Family: netlink.FAMILY_V6,
	})
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("withdraw %v: %w", p, err)
	}
	return nil
}

// Live lists the routes this package owns in the namespace.
func (m *Manager) Live() ([]Want, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live()
}

func (m *Manager) live() ([]Want, error) {
	rs, err := m.h.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Protocol: Protocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return nil, err
	}
	var out []Want
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		a, _ := netip.AddrFromSlice(r.Dst.IP)
		via, _ := netip.AddrFromSlice(r.Gw)
		name := ""
		if l, err := m.h.LinkByIndex(r.LinkIndex); err == nil {
			name = l.Attrs().Name
		}
		out = append(out, Want{Prefix: netip.PrefixFrom(a, ones), Via: via, Iface: name})
	}
	return out, nil
}

// Sync makes the owned routes exactly want. With dry it only reports. The
// report lines are what /pd/sync returns in `output`.
func (m *Manager) Sync(want []Want, dry bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	live, err := m.live()
	if err != nil {
		return nil, err
	}
	m.links = map[string]int{}
	if !dry {
		m.installed = map[netip.Prefix]Want{}
		for _, w := range want {
			w.Via = w.Via.WithZone("")
			m.installed[w.Prefix] = w
		}
	}
	have := map[netip.Prefix]Want{}
	for _, l := range live {
		have[l.Prefix] = l
	}
	wanted := map[netip.Prefix]bool{}
	var lines []string
	var errs []error
	for _, w := range want {
		wanted[w.Prefix] = true
		if h, ok := have[w.Prefix]; ok && h.Via == w.Via.WithZone("") && h.Iface == w.Iface {
			continue
		}
		lines = append(lines, "add "+w.String())
		if !dry {
			r, err := m.route(w)
			if err == nil {
				err = m.h.RouteReplace(r)
			}
			errs = append(errs, err)
		}
	}
	for _, l := range live {
		if wanted[l.Prefix] {
			continue
		}
		lines = append(lines, "del "+l.String())
		if !dry {
			errs = append(errs, m.h.RouteDel(&netlink.Route{Dst: &net.IPNet{IP: l.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(l.Prefix.Bits(), 128)}, Protocol: Protocol, Family: netlink.FAMILY_V6}))
		}
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		lines = []string{fmt.Sprintf("in sync: %d delegated routes", len(want))}
	}
	return lines, errors.Join(errs...)
}
