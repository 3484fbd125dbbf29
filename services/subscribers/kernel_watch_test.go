package subscribers_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"routerd.dev/shared/netns"
)

// kernelWatch timestamps the traffic-control and nftables changes of a
// namespace as the kernel announces them (the RTNLGRP_TC and
// NFNLGRP_NFTABLES multicast groups), so a benchmark can say when a
// request's kernel objects came into being without polling the kernel:
// every tc message is the shaper's (nothing else runs tc there), an
// nftables message is named by its table.
type kernelWatch struct {
	mu       sync.Mutex
	seen     []kernelChange
	overflow int
	stop     atomic.Bool
	wg       sync.WaitGroup
}

type kernelChange struct {
	at   time.Time
	kind string // "tc" or "nft:<table>"
}

func watchKernel(t testing.TB, ns *netns.NS) *kernelWatch {
	t.Helper()
	w := &kernelWatch{}
	for _, g := range []struct {
		proto int
		group uint
	}{{unix.NETLINK_ROUTE, unix.RTNLGRP_TC}, {unix.NETLINK_NETFILTER, unix.NFNLGRP_NFTABLES}} {
		fd := -1
		if err := ns.Do(func() error {
			var err error
			if fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, g.proto); err != nil {
				return err
			}
			return unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (g.group - 1)})
		}); err != nil {
			t.Fatalf("kernel watch: %v", err)
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			t.Fatal(err)
		}
		w.wg.Add(1)
		go w.read(fd, g.proto)
	}
	t.Cleanup(func() { w.stop.Store(true); w.wg.Wait() })
	return w
}

// read receives on a blocking socket from a thread of its own, so that a
// change is timestamped as soon as the kernel wakes the thread (not when
// the runtime's poller gets round to it): the times are upper bounds, a
// scheduling delay late at most.
func (w *kernelWatch) read(fd, proto int) {
	runtime.LockOSThread()
	defer w.wg.Done()
	defer unix.Close(fd)
	buf := make([]byte, 1<<16)
	for !w.stop.Load() {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		at := time.Now()
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				w.mu.Lock()
				w.overflow++
				w.mu.Unlock()
			}
			continue // timeouts let stop be seen
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		w.mu.Lock()
		for _, m := range msgs {
			if k := classify(proto, m); k != "" {
				w.seen = append(w.seen, kernelChange{at, k})
			}
		}
		w.mu.Unlock()
	}
}

// classify names a change: tc for any qdisc, class or filter message,
// nft:<table> for an nftables message carrying its table's name.
func classify(proto int, m syscall.NetlinkMessage) string {
	t := m.Header.Type
	if proto == unix.NETLINK_ROUTE {
		if t >= unix.RTM_NEWQDISC && t <= unix.RTM_GETTFILTER {
			return "tc"
		}
		return ""
	}
	if t>>8 != unix.NFNL_SUBSYS_NFTABLES || t&0xff == unix.NFT_MSG_NEWGEN || len(m.Data) < 4 {
		return ""
	}
	// The attributes after the nfgenmsg; the first NFTA_*_TABLE (type 1)
	// names the table.
	for b := m.Data[4:]; len(b) >= 4; {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < 4 || l > len(b) {
			return ""
		}
		if typ == 1 {
			return "nft:" + string(trimNul(b[4:l]))
		}
		b = b[min((l+3)&^3, len(b)):]
	}
	return ""
}

func trimNul(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// last is the latest change of a matching kind announced at or after from.
func (w *kernelWatch) last(from time.Time, match func(kind string) bool) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var at time.Time
	for i := len(w.seen) - 1; i >= 0 && !w.seen[i].at.Before(from); i-- {
		if match(w.seen[i].kind) && w.seen[i].at.After(at) {
			at = w.seen[i].at
		}
	}
	return at, !at.IsZero()
}

// String summarises what was seen (a failure's message).
func (w *kernelWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	kinds := map[string]int{}
	for _, c := range w.seen {
		kinds[c.kind]++
	}
	return fmt.Sprintf("%d changes announced %v, %d overflows", len(w.seen), kinds, w.overflow)
}

// overflows says how often the kernel dropped announcements (the socket's
// buffer full): a measurement with drops may have missed a change.
func (w *kernelWatch) overflows() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.overflow
}

// dhcpProbe sends DHCPDISCOVERs from a subscriber's side of a veth (in its
// own namespace, raw Ethernet frames from the client's MAC) and reads the
// offers: the proof that the DHCP engine holds a client's reservation.
type dhcpProbe struct {
	fd    int
	index int
	xid   uint32
}

func newDHCPProbe(t testing.TB, ns *netns.NS, iface string) *dhcpProbe {
	t.Helper()
	p := &dhcpProbe{xid: 0x5eed0000}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		p.index = ifi.Index
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		p.fd = fd
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("dhcp probe: %v", err)
	}
	tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
	if err := unix.SetsockoptTimeval(p.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p.fd) })
	return p
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// offer sends one DISCOVER from mac and answers the address offered to it.
func (p *dhcpProbe) offer(mac string, wait time.Duration) (string, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return "", err
	}
	p.xid++
	xid := p.xid
	bootp := make([]byte, 300)
	bootp[0], bootp[1], bootp[2] = 1, 1, 6 // BOOTREQUEST, Ethernet
	binary.BigEndian.PutUint32(bootp[4:], xid)
	binary.BigEndian.PutUint16(bootp[10:], 0x8000) // answer by broadcast
	copy(bootp[28:], hw)
	copy(bootp[236:], []byte{99, 130, 83, 99, 53, 1, 1, 55, 2, 1, 3, 255})
	udp := make([]byte, 8+len(bootp))
	binary.BigEndian.PutUint16(udp[0:], 68)
	binary.BigEndian.PutUint16(udp[2:], 67)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], bootp)
	ip := make([]byte, 20+len(udp))
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	copy(ip[16:], []byte{255, 255, 255, 255})
	binary.BigEndian.PutUint16(ip[10:], ipSum(ip[:20]))
	copy(ip[20:], udp)
	frame := append(append(append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, hw...), 0x08, 0x00), ip...)
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: p.index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	if err := unix.Sendto(p.fd, frame, 0, to); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	for end := time.Now().Add(wait); time.Now().Before(end); {
		n, _, err := unix.Recvfrom(p.fd, buf, 0)
		if err != nil {
			continue
		}
		f := buf[:n]
		if n < 14+20+8+240 || f[12] != 0x08 || f[13] != 0 || f[14+9] != unix.IPPROTO_UDP {
			continue
		}
		ihl := int(f[14]&0x0f) * 4
		u := f[14+ihl:]
		if len(u) < 8+240 || binary.BigEndian.Uint16(u[2:]) != 68 {
			continue
		}
		b := u[8:]
		if b[0] != 2 || binary.BigEndian.Uint32(b[4:]) != xid {
			continue
		}
		if typ := dhcpOption(b[240:], 53); len(typ) != 1 || typ[0] != 2 {
			return "", fmt.Errorf("answer of type %v, not an offer", typ)
		}
		return net.IP(b[16:20]).String(), nil
	}
	return "", fmt.Errorf("no offer for %s within %v", mac, wait)
}

func dhcpOption(opts []byte, code byte) []byte {
	for i := 0; i < len(opts); {
		switch opts[i] {
		case 0:
			i++
			continue
		case 255:
			return nil
		}
		if i+1 >= len(opts) || i+2+int(opts[i+1]) > len(opts) {
			return nil
		}
		if opts[i] == code {
			return opts[i+2 : i+2+int(opts[i+1])]
		}
		i += 2 + int(opts[i+1])
	}
	return nil
}

func ipSum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
