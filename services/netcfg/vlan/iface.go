package vlan

import (
	"context"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	"routerd.dev/services/netcfg/link"
)

// Interfaces answers GET /iface: every link of the namespace.
func (b *Book) Interfaces(ctx context.Context, _ *api.None) (*api.IfaceList, error) {
	links, err := link.Links(b.nl)
	if err != nil {
		return nil, err
	}
	live, err := liveAddrs(b.nl)
	if err != nil {
		return nil, err
	}
	byIndex := map[int]netlink.Link{}
	for _, l := range links {
		byIndex[l.Attrs().Index] = l
	}
	out := &api.IfaceList{Interfaces: make([]api.Iface, 0, len(links))}
	for _, l := range links {
		a := l.Attrs()
		i := api.Iface{Name: a.Name, Type: kind(l, byIndex), Status: "DOWN", MTU: a.MTU}
		// UP only when the link is up and has carrier.
		if linkState(l) == "UP" {
			i.Status = "UP"
		}
		if p, ok := byIndex[a.ParentIndex]; ok {
			i.Parent = p.Attrs().Name
		} else if a.MasterIndex != 0 {
			if m, ok := byIndex[a.MasterIndex]; ok {
				i.Parent = m.Attrs().Name
			}
		}
		if v, ok := l.(*netlink.Vlan); ok {
			id, proto := v.VlanId, link.Dot1Q
			if v.VlanProtocol == netlink.VLAN_PROTOCOL_8021AD {
				proto = link.Dot1AD
			}
			i.VLANID, i.VLANProto = &id, &proto
		}
		if a.Statistics != nil {
			i.RxBytes, i.TxBytes = a.Statistics.RxBytes, a.Statistics.TxBytes
		}
		i.IPs, i.IPs6 = split(live[a.Name])
		out.Interfaces = append(out.Interfaces, i)
	}
	sort.Slice(out.Interfaces, func(i, j int) bool { return out.Interfaces[i].Name < out.Interfaces[j].Name })
	return out, nil
}

// kind is the spec's interface type: physical, vlan, svlan, cvlan, usb,
// loopback; bond, bridge, veth and other for links the spec does not name.
func kind(l netlink.Link, byIndex map[int]netlink.Link) string {
	a := l.Attrs()
	if a.Flags&netlinkLoopback != 0 {
		return "loopback"
	}
	switch v := l.(type) {
	case *netlink.Vlan:
		if v.VlanProtocol == netlink.VLAN_PROTOCOL_8021AD {
			return "svlan"
		}
		if p, ok := byIndex[a.ParentIndex].(*netlink.Vlan); ok && p.VlanProtocol == netlink.VLAN_PROTOCOL_8021AD {
			return "cvlan"
		}
		return "vlan"
	case *netlink.Bond:
		return "bond"
	case *netlink.Bridge:
		return "bridge"
	case *netlink.Veth:
		return "veth"
	case *netlink.Device:
		if strings.HasPrefix(a.Name, "usb") || strings.HasPrefix(a.Name, "enx") {
			return "usb"
		}
		return "physical"
	}
	return "other"
}

// netlinkLoopback is IFF_LOOPBACK.
const netlinkLoopback = 0x8
