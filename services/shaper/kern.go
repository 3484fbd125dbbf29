package shaper

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// The tc layout on one shaped interface X and its ifb (see ARCHITECTURE.md,
// "The shaper service"):
//
//	X    root htb 7264:  ── bpf filter (priority >> 16 → 7264:G)
//	       class 7264:G (one per /24 of the interface's subscribers)
//	         qdisc htb G:   class G:m (m = last octet + 1), leaf pfifo or fq_codel
//	X    ingress ffff:  ── u32 match-all prio 0x7264, mirred redirect → ifb
//	ifb  root htb 7264: ── u32 prio 1 ip: hash on saddr's 3rd octet (table 100:),
//	                        node per /24 → 7264:G
//	       class 7264:G
//	         qdisc htb G: ── u32 prio 1 ip: hash on saddr's last octet (table 200:),
//	                         node per subscriber → G:m
//	           class G:m
//
// The download class is chosen by nftables in the forward path (the map
// from the destination address to G:m sets the packet's priority); the
// root's program sends the packet to group G, whose HTB finds G:m by the
// priority itself. Each qdisc holds at most 256 subscriber classes, so the
// kernel's per-class costs that grow with the classes of one qdisc (the
// reverse binding walk over every class each time a class is created) stay
// bounded however many subscribers an interface has.

const (
	major      = kernel.ShaperQdiscMajor
	tableGroup = 0x100 // ifb root: /24 → group
	tableSub   = 0x200 // nested group qdisc on the ifb: address → class
	groupRate  = 100_000_000_000
	maxGroup   = 0x7000
)

func rootHandle() uint32         { return netlink.MakeHandle(major, 0) }
func groupClass(g uint16) uint32 { return netlink.MakeHandle(major, g) }
func groupQdisc(g uint16) uint32 { return netlink.MakeHandle(g, 0) }

// ifbName is the ifb carrying iface's upload: "shp-<iface>", or a hash of
// the name when that is longer than the kernel's 15 bytes.
func ifbName(iface string) string {
	n := "shp-" + iface
	if len(n) <= 15 {
		return n
	}
	h := fnv.New32a()
	h.Write([]byte(iface))
	return fmt.Sprintf("shp-%08x", h.Sum32())
}

func ifbAlias(iface string) string { return kernel.ShaperLinkAlias + " ifb of " + iface }

// quantum keeps HTB's DRR quantum in the range the kernel accepts quietly.
func quantum(bitsPerSec uint64) uint32 {
	q := bitsPerSec / 8 / 10
	if q < 1600 {
		q = 1600
	}
	if q > 200000 {
		q = 200000
	}
	return uint32(q)
}

func htbClass(link int, parent, handle uint32, bits uint64) *netlink.HtbClass {
	return netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: link, Parent: parent, Handle: handle},
		netlink.HtbClassAttrs{Rate: bits, Ceil: bits, Quantum: quantum(bits)})
}

func htbQdisc(link int, parent, handle uint32) *netlink.Htb {
	q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: link, Parent: parent, Handle: handle})
	q.Defcls = 0 // unclassified traffic goes unshaped
	return q
}

// ifaceK is one shaped interface's kernel handles.
type ifaceK struct {
	name  string
	index int
	ifb   string
	ifbIx int
}

// kern holds the netlink handle of the target namespace.
type kern struct {
	nl *netlink.Handle
	// leaf is "fq_codel", "pfifo" (the kernel lacks fq_codel), or "" until
	// the first leaf tells.
	leaf string
}

// ensureIface gives iface its roots, its ifb and the redirect, each only
// when missing. A root qdisc that is not the shaper's is never replaced.
func (k *kern) ensureIface(name string) (*ifaceK, error) {
	link, err := k.nl.LinkByName(name)
	if err != nil {
		return nil, errNoIface
	}
	ik := &ifaceK{name: name, index: link.Attrs().Index, ifb: ifbName(name)}
	ifb, err := k.nl.LinkByName(ik.ifb)
	if err != nil {
		nb := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: ik.ifb, TxQLen: 1000}}
		if err := k.nl.LinkAdd(nb); err != nil {
			return nil, fmt.Errorf("creating %s: %w", ik.ifb, err)
		}
		if ifb, err = k.nl.LinkByName(ik.ifb); err != nil {
			return nil, err
		}
		// The kernel ignores an alias in the creating message: mark it now,
		// and take it out again when it cannot be marked.
		if err := k.nl.LinkSetAlias(ifb, ifbAlias(name)); err != nil {
			_ = k.nl.LinkDel(ifb)
			return nil, fmt.Errorf("marking %s: %w", ik.ifb, err)
		}
	} else if ifb.Attrs().Alias != ifbAlias(name) {
		return nil, fmt.Errorf("%s exists and is not the shaper's ifb of %s", ik.ifb, name)
	}
	if ifb.Attrs().Flags&unix.IFF_UP == 0 {
		if err := k.nl.LinkSetUp(ifb); err != nil {
			return nil, err
		}
	}
	ik.ifbIx = ifb.Attrs().Index
	for _, ix := range []int{ik.index, ik.ifbIx} {
		if err := k.ensureRoot(ix); err != nil {
			return nil, fmt.Errorf("root qdisc on %s: %w", name, err)
		}
	}
	if err := k.ensureGroupFilter(ik.index); err != nil {
		return nil, err
	}
	if err := k.ensureRedirect(ik); err != nil {
		return nil, err
	}
	if err := k.ensureTable(ik.ifbIx, rootHandle(), tableGroup, 8); err != nil {
		return nil, err
	}
	return ik, nil
}

var errNoIface = errors.New("no such interface")

func (k *kern) ensureRoot(ix int) error {
	qs, err := k.nl.QdiscList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ix}})
	if err != nil {
		return err
	}
	for _, q := range qs {
		a := q.Attrs()
		if a.LinkIndex != ix || a.Parent != netlink.HANDLE_ROOT {
			continue
		}
		if a.Handle == rootHandle() && q.Type() == "htb" {
			return nil
		}
		if a.Handle>>16 != 0 && a.Handle>>16 != 0x8000 && q.Type() != "noqueue" && q.Type() != "pfifo_fast" && q.Type() != "mq" && q.Type() != "fq_codel" {
			return fmt.Errorf("the root qdisc %s %x: is not the shaper's", q.Type(), a.Handle>>16)
		}
	}
	return k.nl.QdiscReplace(htbQdisc(ix, netlink.HANDLE_ROOT, rootHandle()))
}

func (k *kern) ensureGroupFilter(ix int) error {
	fs, err := k.nl.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ix}}, rootHandle())
	if err != nil {
		return err
	}
	for _, f := range fs {
		if f.Type() == "bpf" && f.Attrs().Priority == 1 {
			return nil
		}
	}
	fd, err := groupProgram()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return k.nl.FilterAdd(&netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ix, Parent: rootHandle(), Priority: 1, Protocol: unix.ETH_P_ALL},
		Fd:          fd, Name: "routerd_shaper",
	})
}

func (k *kern) ensureRedirect(ik *ifaceK) error {
	link := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ik.index}}
	qs, err := k.nl.QdiscList(link)
	if err != nil {
		return err
	}
	have := false
	for _, q := range qs {
		if q.Attrs().LinkIndex == ik.index && q.Attrs().Parent == netlink.HANDLE_INGRESS {
			have = true
		}
	}
	if !have {
		if err := k.nl.QdiscAdd(&netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ik.index, Parent: netlink.HANDLE_INGRESS, Handle: netlink.MakeHandle(0xffff, 0)}}); err != nil {
			return fmt.Errorf("ingress qdisc on %s: %w", ik.name, err)
		}
	}
	fs, err := k.nl.FilterList(link, netlink.MakeHandle(0xffff, 0))
	if err != nil {
		return err
	}
	for _, f := range fs {
		if f.Attrs().Priority == kernel.ShaperFilterPrio {
			if u, ok := f.(*netlink.U32); ok {
				for _, a := range u.Actions {
					if m, ok := a.(*netlink.MirredAction); ok && m.Ifindex == ik.ifbIx {
						return nil
					}
				}
			}
			_ = k.nl.FilterDel(f)
		}
	}
	return k.nl.FilterAdd(&netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ik.index, Parent: netlink.MakeHandle(0xffff, 0), Priority: kernel.ShaperFilterPrio, Protocol: unix.ETH_P_ALL},
		Actions:     []netlink.Action{netlink.NewMirredAction(ik.ifbIx)},
	})
}

// ensureTable makes the u32 hash table htid (256 buckets) in qdisc parent
// with a link to it from the root table hashing the source address's byte
// at bit shift (8: 3rd octet, 0: 4th).
func (k *kern) ensureTable(ix int, parent uint32, htid uint32, shift uint) error {
	fs, err := k.nl.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ix}}, parent)
	if err != nil {
		return err
	}
	table, linked := false, false
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok || f.Attrs().Priority != 1 {
			continue
		}
		if f.Attrs().Handle == htid<<20 {
			table = true
		}
		if u.Link == htid<<20 {
			linked = true
		}
	}
	attrs := netlink.FilterAttrs{LinkIndex: ix, Parent: parent, Priority: 1, Protocol: unix.ETH_P_IP}
	if !table {
		attrs.Handle = htid << 20
		// The library does not list hash tables themselves: one that
		// exists already is fine.
		if err := k.nl.FilterAdd(&netlink.U32{FilterAttrs: attrs, Divisor: 256, Sel: &nl.TcU32Sel{}}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("u32 table %x: on %d: %w", htid, ix, err)
		}
		attrs.Handle = 0
	}
	if !linked {
		sel := &nl.TcU32Sel{Hmask: 0xff << shift, Hoff: 12, Keys: []nl.TcU32Key{{Mask: 0, Val: 0, Off: 12}}}
		if err := k.nl.FilterAdd(&netlink.U32{FilterAttrs: attrs, Link: htid << 20, Sel: sel}); err != nil {
			return fmt.Errorf("u32 link to %x: on %d: %w", htid, ix, err)
		}
	}
	return nil
}

func v4(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// groupNode is the handle of a /24's node in the ifb root's table.
func groupNode(ip netip.Addr, n uint16) uint32 {
	return tableGroup<<20 | (v4(ip)>>8&0xff)<<12 | uint32(n)
}

// subNode is the handle of a subscriber's node in its group's table.
func subNode(ip netip.Addr) uint32 {
	return tableSub<<20 | (v4(ip)&0xff)<<12 | 1
}

// putGroup builds group g (classes, nested qdiscs, the nested table and the
// /24's node on the ifb root) where missing.
func (k *kern) putGroup(ik *ifaceK, g uint16, net24 netip.Addr, node uint16) error {
	for _, ix := range []int{ik.index, ik.ifbIx} {
		if err := k.nl.ClassReplace(htbClass(ix, rootHandle(), groupClass(g), groupRate)); err != nil {
			return fmt.Errorf("group class %x:%x: %w", major, g, err)
		}
		if err := k.nl.QdiscReplace(htbQdisc(ix, groupClass(g), groupQdisc(g))); err != nil {
			return fmt.Errorf("group qdisc %x: %w", g, err)
		}
	}
	if err := k.ensureTable(ik.ifbIx, groupQdisc(g), tableSub, 0); err != nil {
		return err
	}
	h := groupNode(net24, node)
	return k.nl.FilterReplace(&netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ik.ifbIx, Parent: rootHandle(), Priority: 1, Protocol: unix.ETH_P_IP, Handle: h},
		Hash:        h &^ 0xfff, ClassId: groupClass(g),
		Sel: &nl.TcU32Sel{Flags: nl.TC_U32_TERMINAL, Keys: []nl.TcU32Key{{Mask: 0xffffff00, Val: v4(net24) & 0xffffff00, Off: 12}}},
	})
}

// delGroup removes group g: the /24's node, then the classes (their
// nested qdiscs, classes and filters go with them).
func (k *kern) delGroup(ik *ifaceK, g uint16, net24 netip.Addr, node uint16) error {
	h := groupNode(net24, node)
	err := k.nl.FilterDel(&netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: ik.ifbIx, Parent: rootHandle(), Priority: 1, Protocol: unix.ETH_P_IP, Handle: h}})
	err = errors.Join(ignoreMissing(err))
	for _, ix := range []int{ik.index, ik.ifbIx} {
		err = errors.Join(err, ignoreMissing(k.nl.ClassDel(htbClass(ix, rootHandle(), groupClass(g), groupRate))))
	}
	return err
}

// putSub creates or changes one subscriber's classes (down on the
// interface, up on the ifb) and its upload node. created says whether the
// classes are new (then the leaf is set).
func (k *kern) putSub(ik *ifaceK, classid uint32, ip netip.Addr, down, up int64, created bool) error {
	g := uint16(classid >> 16)
	for i, ix := range []int{ik.index, ik.ifbIx} {
		bits := uint64(down) * 1_000_000
		if i == 1 {
			bits = uint64(up) * 1_000_000
		}
		if err := k.nl.ClassReplace(htbClass(ix, groupQdisc(g), classid, bits)); err != nil {
			return fmt.Errorf("class %x:%x: %w", classid>>16, classid&0xffff, err)
		}
		if created {
			if err := k.putLeaf(ix, classid); err != nil {
				return err
			}
		}
	}
	h := subNode(ip)
	return k.nl.FilterReplace(&netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ik.ifbIx, Parent: groupQdisc(g), Priority: 1, Protocol: unix.ETH_P_IP, Handle: h},
		Hash:        h &^ 0xfff, ClassId: classid,
		Sel: &nl.TcU32Sel{Flags: nl.TC_U32_TERMINAL, Keys: []nl.TcU32Key{{Mask: 0xffffffff, Val: v4(ip), Off: 12}}},
	})
}

// putLeaf gives a new class fq_codel, or leaves HTB's own pfifo when the
// kernel has no fq_codel (found out once).
func (k *kern) putLeaf(ix int, classid uint32) error {
	if k.leaf == "pfifo" {
		return nil
	}
	q := netlink.NewFqCodel(netlink.QdiscAttrs{LinkIndex: ix, Parent: classid})
	err := k.nl.QdiscReplace(q)
	switch {
	case err == nil:
		k.leaf = "fq_codel"
		return nil
	case k.leaf == "" && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)):
		k.leaf = "pfifo"
		return nil
	default:
		return fmt.Errorf("fq_codel leaf of %x:%x: %w", classid>>16, classid&0xffff, err)
	}
}

// delSub removes one subscriber's upload node and classes.
func (k *kern) delSub(ik *ifaceK, classid uint32, ip netip.Addr) error {
	g := uint16(classid >> 16)
	h := subNode(ip)
	err := ignoreMissing(k.nl.FilterDel(&netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: ik.ifbIx, Parent: groupQdisc(g), Priority: 1, Protocol: unix.ETH_P_IP, Handle: h}}))
	for _, ix := range []int{ik.index, ik.ifbIx} {
		err = errors.Join(err, ignoreMissing(k.nl.ClassDel(htbClass(ix, groupQdisc(g), classid, 1_000_000))))
	}
	return err
}

// dropIface removes everything the shaper made for iface: its ifb, its
// redirect filter, its root (only when it is the shaper's).
func (k *kern) dropIface(name string) error {
	var errs []error
	if ifb, err := k.nl.LinkByName(ifbName(name)); err == nil && strings.HasPrefix(ifb.Attrs().Alias, kernel.ShaperLinkAlias) {
		errs = append(errs, k.nl.LinkDel(ifb))
	}
	link, err := k.nl.LinkByName(name)
	if err != nil {
		return errors.Join(errs...)
	}
	ix := link.Attrs().Index
	if fs, err := k.nl.FilterList(link, netlink.MakeHandle(0xffff, 0)); err == nil {
		for _, f := range fs {
			if f.Attrs().Priority == kernel.ShaperFilterPrio {
				errs = append(errs, ignoreMissing(k.nl.FilterDel(f)))
			}
		}
	}
	if qs, err := k.nl.QdiscList(link); err == nil {
		for _, q := range qs {
			if q.Attrs().LinkIndex == ix && q.Attrs().Parent == netlink.HANDLE_ROOT && q.Attrs().Handle == rootHandle() {
				errs = append(errs, ignoreMissing(k.nl.QdiscDel(q)))
			}
		}
	}
	return errors.Join(errs...)
}

func ignoreMissing(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}

// rates changes one subscriber's two classes to new rates (the classes
// exist; nothing else is touched).
func (k *kern) rates(ik *ifaceK, classid uint32, down, up int64) error {
	g := uint16(classid >> 16)
	if err := k.nl.ClassChange(htbClass(ik.index, groupQdisc(g), classid, uint64(down)*1_000_000)); err != nil {
		return fmt.Errorf("class %x:%x on %s: %w", g, classid&0xffff, ik.name, err)
	}
	if err := k.nl.ClassChange(htbClass(ik.ifbIx, groupQdisc(g), classid, uint64(up)*1_000_000)); err != nil {
		return fmt.Errorf("class %x:%x on %s: %w", g, classid&0xffff, ik.ifb, err)
	}
	return nil
}
