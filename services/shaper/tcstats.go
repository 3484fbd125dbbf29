package shaper

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"routerd.dev/shared/netns"
)

// tcCount is what the kernel counted for one tc class or qdisc.
type tcCount struct {
	bytes, packets uint64
	drops          uint64
}

// statSock reads tc statistics on its own netlink socket of the target
// namespace: a dump parsed for the handle, the kind and the counters only,
// instead of the netlink library's full objects (a dump of 100,000
// classes is read once per sweep of counters.page, and nothing else of a
// class is wanted).
type statSock struct {
	fd  int
	buf []byte
}

func newStatSock(ns *netns.NS) (*statSock, error) {
	fd, err := netlinkSocket(ns, unix.NETLINK_ROUTE, 4<<20)
	if err != nil {
		return nil, fmt.Errorf("shaper: netlink socket: %w", err)
	}
	return &statSock{fd: fd, buf: make([]byte, 1<<20)}, nil
}

func (s *statSock) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

// get asks the kernel for one class (RTM_GETTCLASS: parent its qdisc,
// handle its id) or the qdisc under a class (RTM_GETQDISC: parent the
// class, handle 0) and returns its entry. NLM_F_ECHO makes the kernel
// answer a get to the asker (else it only notifies listeners).
func (s *statSock) get(msgType uint16, ifindex int, parent, handle uint32) (tcEntry, error) {
	req := nl.NewNetlinkRequest(int(msgType), unix.NLM_F_ECHO|unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Parent: parent, Handle: handle})
	if err := unix.Sendto(s.fd, req.Serialize(), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return tcEntry{}, fmt.Errorf("netlink send: %w", err)
	}
	native := nl.NativeEndian()
	var out tcEntry
	found := false
	for {
		n, _, err := unix.Recvfrom(s.fd, s.buf, 0)
		if err != nil {
			return tcEntry{}, fmt.Errorf("netlink receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(s.buf[:n])
		if err != nil {
			return tcEntry{}, fmt.Errorf("netlink receive: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != req.Seq {
				continue
			}
			if m.Header.Type == unix.NLMSG_ERROR {
				if len(m.Data) >= 4 {
					if code := int32(native.Uint32(m.Data[:4])); code != 0 {
						return tcEntry{}, fmt.Errorf("tc get: %w", syscall.Errno(-code))
					}
				}
				if !found {
					return tcEntry{}, fmt.Errorf("tc get: no answer")
				}
				return out, nil
			}
			if e, ok := parseTc(m.Data); ok {
				out, found = e, true
			}
		}
	}
}

// parseTc reads a class's or qdisc's message: struct tcmsg (family, pads,
// ifindex, handle, parent, info), then its attributes.
func parseTc(b []byte) (tcEntry, bool) {
	if len(b) < 20 {
		return tcEntry{}, false
	}
	native := nl.NativeEndian()
	e := tcEntry{handle: native.Uint32(b[8:]), parent: native.Uint32(b[12:])}
	eachAttr(b[20:], func(typ uint16, val []byte) {
		switch typ {
		case unix.TCA_KIND:
			e.kind = cstring(val)
		case unix.TCA_STATS2:
			e.count = parseStats2(val)
		}
	})
	return e, true
}

// tcEntry is one class or qdisc of a dump: its handle, its parent, its
// kind and its counters.
type tcEntry struct {
	handle, parent uint32
	kind           string
	count          tcCount
}

// dump runs RTM_GETTCLASS or RTM_GETQDISC as a dump of the device
// ifindex (classes: the kernel's own filter; with parent, only the
// classes of the qdisc parent) or of every device (ifindex 0: qdiscs) and
// calls fn for each entry with its device.
func (s *statSock) dump(msgType uint16, ifindex int, parent uint32, fn func(ix int, e tcEntry)) error {
	req := nl.NewNetlinkRequest(int(msgType), unix.NLM_F_DUMP)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Parent: parent})
	if err := unix.Sendto(s.fd, req.Serialize(), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	native := nl.NativeEndian()
	for {
		n, _, err := unix.Recvfrom(s.fd, s.buf, 0)
		if err != nil {
			return fmt.Errorf("netlink receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(s.buf[:n])
		if err != nil {
			return fmt.Errorf("netlink receive: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != req.Seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if code := int32(native.Uint32(m.Data[:4])); code != 0 {
						return fmt.Errorf("tc dump: %w", syscall.Errno(-code))
					}
				}
				return nil
			}
			e, ok := parseTc(m.Data)
			if !ok {
				continue
			}
			ix := int(int32(native.Uint32(m.Data[4:])))
			if ifindex != 0 && ix != ifindex {
				continue
			}
			fn(ix, e)
		}
	}
}

// tcaStatsPkt64 is TCA_STATS_PKT64 (linux/gen_stats.h), which neither
// x/sys nor the netlink library names.
const tcaStatsPkt64 = 8

// parseStats2 reads TCA_STATS2: gnet_stats_basic (bytes u64, packets u32;
// TCA_STATS_PKT64 holds the packets in full where the kernel gives it)
// and gnet_stats_queue (qlen, backlog, drops, requeues, overlimits, u32
// each).
func parseStats2(b []byte) tcCount {
	var c tcCount
	var pkt64 uint64
	has64 := false
	eachAttr(b, func(typ uint16, v []byte) {
		switch {
		case typ == nl.TCA_STATS_BASIC && len(v) >= 12:
			c.bytes = binary.NativeEndian.Uint64(v[0:])
			c.packets = uint64(binary.NativeEndian.Uint32(v[8:]))
		case typ == tcaStatsPkt64 && len(v) >= 8:
			pkt64, has64 = binary.NativeEndian.Uint64(v), true
		case typ == nl.TCA_STATS_QUEUE && len(v) >= 12:
			c.drops = uint64(binary.NativeEndian.Uint32(v[8:]))
		}
	})
	if has64 {
		c.packets = pkt64
	}
	return c
}

// classCounts reads the subscriber and spare classes of the device
// ifindex, one dump per group G (the classes of qdisc G:): class id ->
// counters. One dump of the whole device would cost the kernel in
// proportion to the square of its classes: each part of a dump (at most
// 32 KB, some 130 classes) walks every qdisc of the device again, HTB's
// 25,000 default leaves among them at 25,000 subscribers (measured: 0.5 s
// for one such device), while a dump naming its qdisc finds it by one
// bucket of the device's qdisc hash.
func (s *statSock) classCounts(ifindex int, groups []uint16) (map[uint32]tcCount, error) {
	out := make(map[uint32]tcCount, len(groups)*binSlots)
	for _, g := range groups {
		err := s.dump(unix.RTM_GETTCLASS, ifindex, groupQdisc(g), func(_ int, e tcEntry) {
			if e.kind == "htb" && e.handle>>16 == uint32(g) {
				out[e.handle] = e.count
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// leafDrops reads the drops of the fq_codel leaves of the devices in
// ifaces in one dump: device -> parent class id -> drops. HTB counts in its class only the packets its
// leaf refused on arrival; fq_codel's own drops (its queue management,
// and packets of other flows dropped to make room) are counted in the
// leaf alone, which counts the refused ones too.
func (s *statSock) leafDrops(ifaces map[int]bool) (map[int]map[uint32]uint64, error) {
	out := map[int]map[uint32]uint64{}
	err := s.dump(unix.RTM_GETQDISC, 0, 0, func(ix int, e tcEntry) {
		if e.kind != "fq_codel" || !ifaces[ix] {
			return
		}
		if out[ix] == nil {
			out[ix] = map[uint32]uint64{}
		}
		out[ix][e.parent] = e.count.drops
	})
	return out, err
}
