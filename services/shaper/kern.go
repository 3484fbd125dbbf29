package shaper

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// The tc layout on one shaped interface X (see ARCHITECTURE.md, "The
// shaper service"):
//
//	X    root htb 7264:  ── bpf filter (priority >> 16 → 7264:G)
//	       class 7264:G (one per 256 classes of the interface)
//	         qdisc htb G:   class G:m (m 1..256: a subscriber's or a spare), leaf pfifo or fq_codel
//
// The download class is chosen by nftables in the forward path (the map
// from the destination address to G:m sets the packet's priority); the
// root's program sends the packet to group G, whose HTB finds G:m by the
// priority itself. Each qdisc holds at most 256 subscriber classes, so the
// kernel's per-class costs that grow with the classes of one qdisc (the
// reverse binding walk over every class each time a class is created) stay
// bounded however many subscribers an interface has. Upload has no tc
// object at all: it is policed in nftables (nft.go), because every class
// creation also walks a global list of every filter block bound for
// offload on devices without ndo_setup_tc (veth, ifb), and a class per
// subscriber on an ifb doubled that list and the walks. For the same
// reason download classes are made ahead of need, while the shaper is
// idle (pool.go): a new subscriber takes a spare class and changes its
// rate.

const (
	major     = kernel.ShaperQdiscMajor
	groupRate = 100_000_000_000
	maxGroup  = 0x7000
)

func rootHandle() uint32         { return netlink.MakeHandle(major, 0) }
func groupClass(g uint16) uint32 { return netlink.MakeHandle(major, g) }
func groupQdisc(g uint16) uint32 { return netlink.MakeHandle(g, 0) }

// legacyIfbAlias is the alias of the ifb that earlier versions created
// to shape iface's upload; the reconcile removes such links.
func legacyIfbAlias(iface string) string { return kernel.ShaperLinkAlias + " ifb of " + iface }

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
}

// kern holds the netlink handle of the target namespace.
type kern struct {
	nl *netlink.Handle
	// leaf is "fq_codel", "pfifo" (the kernel lacks fq_codel), or "" until
	// the first leaf tells.
	leaf string
}

// ensureIface gives iface its root and the root's classifier, each only
// when missing. A root qdisc that is not the shaper's is never replaced.
func (k *kern) ensureIface(name string) (*ifaceK, error) {
	link, err := k.nl.LinkByName(name)
	if err != nil {
		return nil, errNoIface
	}
	ik := &ifaceK{name: name, index: link.Attrs().Index}
	if err := k.ensureRoot(ik.index); err != nil {
		return nil, fmt.Errorf("root qdisc on %s: %w", name, err)
	}
	if err := k.ensureGroupFilter(ik.index); err != nil {
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

// putGroup builds group g (its class under the root and the nested HTB)
// where missing.
func (k *kern) putGroup(ik *ifaceK, g uint16) error {
	if err := k.nl.ClassReplace(htbClass(ik.index, rootHandle(), groupClass(g), groupRate)); err != nil {
		return fmt.Errorf("group class %x:%x: %w", major, g, err)
	}
	if err := k.nl.QdiscReplace(htbQdisc(ik.index, groupClass(g), groupQdisc(g))); err != nil {
		return fmt.Errorf("group qdisc %x: %w", g, err)
	}
	return nil
}

// delGroup removes group g: its class (the nested qdisc and its classes
// go with it).
func (k *kern) delGroup(ik *ifaceK, g uint16) error {
	return ignoreMissing(k.nl.ClassDel(htbClass(ik.index, rootHandle(), groupClass(g), groupRate)))
}

// putSub creates or changes one subscriber's download class. created says
// whether the class is new (then the leaf is set).
func (k *kern) putSub(ik *ifaceK, classid uint32, down int64, created bool) error {
	g := uint16(classid >> 16)
	if err := k.nl.ClassReplace(htbClass(ik.index, groupQdisc(g), classid, uint64(down)*1_000_000)); err != nil {
		return fmt.Errorf("class %x:%x: %w", classid>>16, classid&0xffff, err)
	}
	if created {
		return k.putLeaf(ik.index, classid)
	}
	return nil
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

// delSub removes one subscriber's class.
func (k *kern) delSub(ik *ifaceK, classid uint32) error {
	return ignoreMissing(k.nl.ClassDel(htbClass(ik.index, groupQdisc(uint16(classid>>16)), classid, 1_000_000)))
}

// dropRoot removes the shaper's root from iface (only when it is the
// shaper's); its classes and filters go with it.
func (k *kern) dropRoot(name string) error {
	link, err := k.nl.LinkByName(name)
	if err != nil {
		return nil
	}
	qs, err := k.nl.QdiscList(link)
	if err != nil {
		return err
	}
	var errs []error
	for _, q := range qs {
		a := q.Attrs()
		if a.LinkIndex == link.Attrs().Index && a.Parent == netlink.HANDLE_ROOT && a.Handle == rootHandle() {
			errs = append(errs, ignoreMissing(k.nl.QdiscDel(q)))
		}
	}
	return errors.Join(errs...)
}

// dropLegacyUpload removes what earlier versions made to shape iface's
// upload through an ifb: first the redirect filter on iface's ingress
// qdisc (the shaper's priority, a mirred action to that ifb: nothing else
// is touched, not even the ingress qdisc, which may serve others), then
// the ifb link, recognised by its alias. The order matters: a redirect to
// a link that is gone drops every packet.
func (k *kern) dropLegacyUpload(iface string, ifb netlink.Link) error {
	var errs []error
	if link, err := k.nl.LinkByName(iface); err == nil {
		if fs, err := k.nl.FilterList(link, netlink.MakeHandle(0xffff, 0)); err == nil {
			for _, f := range fs {
				u, ok := f.(*netlink.U32)
				if !ok || f.Attrs().Priority != kernel.ShaperFilterPrio {
					continue
				}
				if !redirectsTo(u, ifb.Attrs().Index) {
					continue
				}
				// Handle 0: the whole filter of that priority, its hash
				// table with its node.
				a := f.Attrs()
				errs = append(errs, ignoreMissing(k.nl.FilterDel(&netlink.U32{FilterAttrs: netlink.FilterAttrs{
					LinkIndex: a.LinkIndex, Parent: a.Parent, Priority: a.Priority, Protocol: a.Protocol}})))
				break
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ignoreMissing(k.nl.LinkDel(ifb))
}

func redirectsTo(u *netlink.U32, ix int) bool {
	for _, a := range u.Actions {
		if m, ok := a.(*netlink.MirredAction); ok && m.Ifindex == ix {
			return true
		}
	}
	return false
}

func ignoreMissing(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}

// rate changes one subscriber's class to a new rate (the class exists;
// nothing else is touched).
func (k *kern) rate(ik *ifaceK, classid uint32, down int64) error {
	g := uint16(classid >> 16)
	if err := k.nl.ClassChange(htbClass(ik.index, groupQdisc(g), classid, uint64(down)*1_000_000)); err != nil {
		return fmt.Errorf("class %x:%x on %s: %w", g, classid&0xffff, ik.name, err)
	}
	return nil
}
