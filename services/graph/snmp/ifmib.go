package snmp

import (
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/shared/netns"
)

// Link is one interface as IF-MIB shows it.
type Link struct {
	Index       int
	Name, Alias string
	IfType      int // IANAifType
	MTU         int
	Phys        net.HardwareAddr
	AdminUp     bool
	Oper        int    // ifOperStatus
	Mbps        uint64 // link speed in Mb/s, 0 when the driver gives none
	Stats       netlink.LinkStatistics64
}

// Links are the interfaces in ifIndex order.
type Links []Link

// LinkSource reads the namespace's links with one netlink dump, kept for
// TTL so that a walk of the interface tables is one dump, not one per
// variable.
type LinkSource struct {
	NS  *netns.NS
	TTL time.Duration
	Log *slog.Logger

	mu    sync.Mutex
	at    time.Time
	links Links
}

// Links are the interfaces now (at most TTL old). A failed dump serves
// the previous one.
func (s *LinkSource) Links() Links {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && time.Since(s.at) < s.TTL {
		return s.links
	}
	links, err := dump(s.NS)
	if err != nil {
		if s.Log != nil {
			s.Log.Warn("snmp: link dump", "err", err)
		}
		s.at = time.Now()
		return s.links
	}
	s.links, s.at = links, time.Now()
	return links
}

func dump(ns *netns.NS) (Links, error) {
	var h *netlink.Handle
	var err error
	if ns != nil {
		h, err = ns.Netlink()
	} else {
		h, err = netlink.NewHandle()
	}
	if err != nil {
		return nil, err
	}
	defer h.Close()
	ls, err := h.LinkList()
	if err != nil {
		return nil, err
	}
	out := make(Links, 0, len(ls))
	for _, l := range ls {
		a := l.Attrs()
		k := Link{Index: a.Index, Name: a.Name, Alias: a.Alias, MTU: a.MTU, Phys: a.HardwareAddr,
			AdminUp: a.Flags&net.FlagUp != 0, IfType: ifType(l), Oper: operStatus(a)}
		if a.Statistics != nil {
			k.Stats = netlink.LinkStatistics64(*a.Statistics)
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	names := make([]string, len(out))
	for i := range out {
		names[i] = out[i].Name
	}
	sp := speeds(ns, names)
	for i := range out {
		out[i].Mbps = sp[out[i].Name]
	}
	return out, nil
}

// ifType maps the kernel's link kind to IANAifType.
func ifType(l netlink.Link) int {
	switch l.Type() {
	case "bridge":
		return 209 // bridge
	case "vlan":
		return 135 // l2vlan
	case "tuntap", "wireguard", "ipip", "gre", "sit", "ip6tnl":
		return 131 // tunnel
	case "ppp":
		return 23 // ppp
	}
	switch l.Attrs().EncapType {
	case "loopback":
		return 24 // softwareLoopback
	case "ether":
		return 6 // ethernetCsmacd
	case "none":
		return 53 // propVirtual
	}
	return 1 // other
}

// operStatus maps IFLA_OPERSTATE to ifOperStatus; the kernel's
// "unknown" (lo, most virtual links) is up when the link runs.
func operStatus(a *netlink.LinkAttrs) int {
	switch a.OperState {
	case netlink.OperUp:
		return 1
	case netlink.OperDown:
		return 2
	case netlink.OperTesting:
		return 3
	case netlink.OperDormant:
		return 5
	case netlink.OperNotPresent:
		return 6
	case netlink.OperLowerLayerDown:
		return 7
	}
	if a.RawFlags&0x40 != 0 && a.Flags&net.FlagUp != 0 { // IFF_RUNNING
		return 1
	}
	if a.Flags&net.FlagUp == 0 {
		return 2
	}
	return 4 // unknown
}

func (l Links) Len() int        { return len(l) }
func (l Links) Index(i int) OID { return OID{uint32(l[i].Index)} }

func (l Links) admin(i int) Value {
	if l[i].AdminUp {
		return Int(1)
	}
	return Int(2)
}

// ifRows is ifTable's view of the links.
type ifRows struct{ Links }

func (r ifRows) Cell(col uint32, i int) (Value, bool) {
	l, s := &r.Links[i], &r.Links[i].Stats
	switch col {
	case 1:
		return Int(l.Index), true
	case 2:
		return Str(l.Name), true
	case 3:
		return Int(l.IfType), true
	case 4:
		return Int(l.MTU), true
	case 5:
		return Gauge32(l.Mbps * 1000000), true // ifSpeed in bit/s, at most 2^32-1 (then ifHighSpeed says it)
	case 6:
		return Bytes(l.Phys), true
	case 7:
		return r.admin(i), true
	case 8:
		return Int(l.Oper), true
	case 10:
		return Counter32(s.RxBytes), true
	case 11:
		return Counter32(s.RxPackets - min(s.Multicast, s.RxPackets)), true
	case 13:
		return Counter32(s.RxDropped), true
	case 14:
		return Counter32(s.RxErrors), true
	case 16:
		return Counter32(s.TxBytes), true
	case 17:
		return Counter32(s.TxPackets), true
	case 19:
		return Counter32(s.TxDropped), true
	case 20:
		return Counter32(s.TxErrors), true
	}
	return Value{}, false
}

// ifXRows is ifXTable's view of the links.
type ifXRows struct{ Links }

func (r ifXRows) Cell(col uint32, i int) (Value, bool) {
	l, s := &r.Links[i], &r.Links[i].Stats
	switch col {
	case 1:
		return Str(l.Name), true
	case 2:
		return Counter32(s.Multicast), true // ifInMulticastPkts
	case 6:
		return Counter64(s.RxBytes), true
	case 7:
		return Counter64(s.RxPackets - min(s.Multicast, s.RxPackets)), true
	case 8:
		return Counter64(s.Multicast), true // ifHCInMulticastPkts
	case 10:
		return Counter64(s.TxBytes), true
	case 11:
		return Counter64(s.TxPackets), true
	case 15:
		return Gauge32(l.Mbps), true // ifHighSpeed, Mb/s
	case 18:
		return Str(l.Alias), true
	}
	return Value{}, false
}

// IfMIB is IF-MIB's ifNumber, ifTable and ifXTable over src.
func IfMIB(src *LinkSource) []Subtree {
	return []Subtree{
		Single(IfNumberOID, func() (Value, bool) { return Int(len(src.Links())), true }),
		NewTable(IfTableOID, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 14, 16, 17, 19, 20},
			func() Rows { return ifRows{src.Links()} }),
		NewTable(IfXTableOID, []uint32{1, 2, 6, 7, 8, 10, 11, 15, 18},
			func() Rows { return ifXRows{src.Links()} }),
	}
}
