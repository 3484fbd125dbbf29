package client

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/shared/netns"
)

// Neigh is one neighbour entry of the router's namespace.
type Neigh struct {
	IP     netip.Addr
	MAC    string // upper-case with colons; empty while unresolved
	State  string // REACHABLE, STALE, DELAY, PROBE, PERMANENT, INCOMPLETE, FAILED, NOARP, NONE
	Iface  string
	Router bool
}

// Online is a neighbour state counted online (the spec's REACHABLE, DELAY,
// PROBE, PERMANENT).
func (n Neigh) Online() bool {
	switch n.State {
	case "REACHABLE", "DELAY", "PROBE", "PERMANENT":
		return true
	}
	return false
}

// Status is online, recent (STALE) or offline.
func (n *Neigh) Status() string {
	switch {
	case n == nil:
		return "offline"
	case n.Online():
		return "online"
	case n.State == "STALE":
		return "recent"
	}
	return "offline"
}

// Neighbours reads the neighbour table and the router's own MACs.
type Neighbours interface {
	Neighbours(ctx context.Context) ([]Neigh, error)
	OwnMACs(ctx context.Context) (map[string]bool, error)
}

// Netlink reads them in a namespace through one dump each.
type Netlink struct{ NS *netns.NS }

func stateName(s int) string {
	for _, x := range []struct {
		bit  int
		name string
	}{{netlink.NUD_PERMANENT, "PERMANENT"}, {netlink.NUD_REACHABLE, "REACHABLE"}, {netlink.NUD_DELAY, "DELAY"},
		{netlink.NUD_PROBE, "PROBE"}, {netlink.NUD_STALE, "STALE"}, {netlink.NUD_INCOMPLETE, "INCOMPLETE"},
		{netlink.NUD_FAILED, "FAILED"}, {netlink.NUD_NOARP, "NOARP"}} {
		if s&x.bit != 0 {
			return x.name
		}
	}
	return "NONE"
}

func macText(hw net.HardwareAddr) string {
	if len(hw) != 6 {
		return ""
	}
	return strings.ToUpper(hw.String())
}

// Neighbours lists the IPv4 and IPv6 neighbours of every link.
func (n Netlink) Neighbours(ctx context.Context) ([]Neigh, error) {
	h, err := n.NS.Netlink()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var out []Neigh
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		list, err := h.NeighList(0, fam)
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			a, ok := netip.AddrFromSlice(e.IP)
			// Multicast and NOARP entries are the kernel's, not devices.
			if !ok || a.IsMulticast() || e.State&netlink.NUD_NOARP != 0 {
				continue
			}
			out = append(out, Neigh{IP: a.Unmap(), MAC: macText(e.HardwareAddr), State: stateName(e.State),
				Iface: names[e.LinkIndex], Router: e.Flags&netlink.NTF_ROUTER != 0})
		}
	}
	return out, nil
}

// OwnMACs are the MACs of the namespace's links.
func (n Netlink) OwnMACs(ctx context.Context) (map[string]bool, error) {
	h, err := n.NS.Netlink()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, err
	}
	m := map[string]bool{}
	for _, l := range links {
		if s := macText(l.Attrs().HardwareAddr); s != "" {
			m[s] = true
		}
	}
	return m, nil
}
