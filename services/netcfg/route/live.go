package route

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// Live renders the kernel's main routing table of one family the way
// `ip route` prints it, one route a line, so operators read what they know.
func (t *Table) Live(family int) ([]string, error) {
	routes, err := t.nl.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	names := t.linkNames()
	out := make([]string, 0, len(routes))
	for _, r := range routes {
		if family == unix.AF_INET6 && r.Type != unix.RTN_UNICAST && r.Type != 0 {
			continue
		}
		out = append(out, render(r, names))
	}
	sort.Strings(out)
	return out, nil
}

// linkNames maps the namespace's link indexes to names; empty when the
// links cannot be listed (routes then print without dev).
func (t *Table) linkNames() map[int]string {
	names := map[int]string{}
	if links, err := t.nl.LinkList(); err == nil {
		for _, l := range links {
			names[l.Attrs().Index] = l.Attrs().Name
		}
	}
	return names
}

var protoNames = map[netlink.RouteProtocol]string{
	unix.RTPROT_KERNEL: "kernel", unix.RTPROT_BOOT: "boot", unix.RTPROT_STATIC: "static",
	unix.RTPROT_RA: "ra", unix.RTPROT_DHCP: "dhcp", 186: "bgp", 188: "ospf", 12: "bird",
	kernel.NetcfgRouteProtocol: kernel.NetcfgRouteProtocolName,
	kernel.DHCPRouteProtocol:   kernel.DHCPRouteProtocolName,
}

var scopeNames = map[netlink.Scope]string{
	netlink.SCOPE_LINK: "link", netlink.SCOPE_HOST: "host",
}

func render(r netlink.Route, names map[int]string) string {
	var b strings.Builder
	if r.Dst == nil || isDefault(r.Dst) {
		b.WriteString("default")
	} else {
		b.WriteString(r.Dst.String())
	}
	if r.Gw != nil {
		fmt.Fprintf(&b, " via %s", r.Gw)
	}
	for _, nh := range r.MultiPath {
		fmt.Fprintf(&b, " nexthop via %s dev %s", nh.Gw, names[nh.LinkIndex])
	}
	if n, ok := names[r.LinkIndex]; ok {
		fmt.Fprintf(&b, " dev %s", n)
	}
	if p, ok := protoNames[r.Protocol]; ok {
		fmt.Fprintf(&b, " proto %s", p)
	} else if r.Protocol != 0 {
		fmt.Fprintf(&b, " proto %d", r.Protocol)
	}
	if s, ok := scopeNames[r.Scope]; ok {
		fmt.Fprintf(&b, " scope %s", s)
	}
	if r.Src != nil {
		fmt.Fprintf(&b, " src %s", r.Src)
	}
	if r.Priority != 0 {
		fmt.Fprintf(&b, " metric %d", r.Priority)
	}
	if r.Flags&unix.RTNH_F_LINKDOWN != 0 {
		b.WriteString(" linkdown")
	}
	return b.String()
}
