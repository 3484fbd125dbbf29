package dhcp

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"routerd.dev/shared/netns"
)

// rcvBuf is large so a burst of requests (a PON port coming back after an
// outage, or perfdhcp) queues in the kernel instead of being dropped.
const rcvBuf = 8 << 20

// batch is how many datagrams one recvmmsg or sendmmsg moves at most.
const batch = 64

// udpSock is one served interface's DHCP socket, used in blocking mode from
// the listener's own receive goroutine rather than through Go's netpoller.
//
// Why: under load a DHCP server answers a steady stream of small packets
// that arrive one or two at a time. Through the netpoller each one costs a
// read that fails with EAGAIN, a park, an epoll_wait and a futex wake before
// the read that succeeds; measured, that was half of the engine's system
// time. A blocking recvmmsg(MSG_WAITFORONE) is one system call per wake,
// and returns every datagram already queued; the answers of one batch go out
// with one sendmmsg. SO_RCVTIMEO bounds each wait so the loop notices that
// it was stopped.
type udpSock struct {
	fd      int
	v6      bool
	ifindex uint32
	iface   string
	mu      sync.RWMutex // sendTo (read) against release (write)
	closed  atomic.Bool
	dead    bool // descriptor closed; guarded by mu
}

// listenUDP opens a UDP socket bound to port on one interface inside ns.
// SO_BINDTODEVICE is what makes "answer only on served interfaces" hold:
// the kernel delivers nothing from any other interface to the socket, and
// SO_REUSEADDR lets one socket per interface share the port. The IPv6
// socket joins All_DHCP_Relay_Agents_and_Servers (ff02::1:2), where
// clients send.
func listenUDP(ns *netns.NS, v6 bool, iface string, port int) (*udpSock, error) {
	s := &udpSock{fd: -1, v6: v6, iface: iface}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		s.ifindex = uint32(ifi.Index)
		family := unix.AF_INET
		if v6 {
			family = unix.AF_INET6
		}
		fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
		if err != nil {
			return err
		}
		s.fd = fd
		opts := []struct{ level, opt, v int }{
			{unix.SOL_SOCKET, unix.SO_REUSEADDR, 1},
			{unix.SOL_SOCKET, unix.SO_BROADCAST, 1},
		}
		if v6 {
			opts = append(opts, struct{ level, opt, v int }{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1})
		}
		for _, o := range opts {
			if err := unix.SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
				return err
			}
		}
		if err := unix.BindToDevice(fd, iface); err != nil {
			return err
		}
		// Best effort: RCVBUFFORCE needs CAP_NET_ADMIN, fall back.
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
		}
		// Kernel receive times, so requests that waited too long in the
		// queue are shed (see maxQueueAge).
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return err
		}
		tv := unix.NsecToTimeval(int64(pollStop))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		if !v6 {
			return unix.Bind(fd, &unix.SockaddrInet4{Port: port})
		}
		if err := unix.Bind(fd, &unix.SockaddrInet6{Port: port}); err != nil {
			return err
		}
		mreq := &unix.IPv6Mreq{Interface: s.ifindex}
		copy(mreq.Multiaddr[:], net.ParseIP("ff02::1:2").To16())
		return unix.SetsockoptIPv6Mreq(fd, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, mreq)
	})
	if err != nil {
		if s.fd >= 0 {
			unix.Close(s.fd)
		}
		family := "udp4"
		if v6 {
			family = "udp6"
		}
		return nil, fmt.Errorf("listen %s on %s: %w", family, iface, err)
	}
	return s, nil
}

// close stops the socket: the receive loop sees it at its next wake (at
// most pollStop later) and closes the descriptor, so no send or receive
// can race a reused descriptor number.
func (s *udpSock) close() { s.closed.Store(true) }

func (s *udpSock) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dead {
		s.dead = true
		unix.Close(s.fd)
	}
}

// mmsghdr is struct mmsghdr from <sys/socket.h>.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// ring is the receive or send state of one batch: headers, buffers and
// addresses allocated once and reused.
type ring struct {
	h    []mmsghdr
	iov  []unix.Iovec
	addr []unix.RawSockaddrInet6 // large enough for either family
	buf  [][]byte
	ctl  []tsCmsg // receive timestamps (receive rings only)
}

// tsCmsg is a control message carrying SCM_TIMESTAMPNS: a cmsghdr and a
// struct timespec (64-bit Linux).
type tsCmsg struct {
	unix.Cmsghdr
	sec, nsec int64
}

func newRing(n, bufSize int) *ring {
	r := &ring{h: make([]mmsghdr, n), iov: make([]unix.Iovec, n), addr: make([]unix.RawSockaddrInet6, n), buf: make([][]byte, n)}
	if bufSize > 0 {
		r.ctl = make([]tsCmsg, n)
	}
	for i := range n {
		if bufSize > 0 {
			r.buf[i] = make([]byte, bufSize)
		}
	}
	return r
}

// prepare points header i at buffer b and address slot i.
func (r *ring) prepare(i int, b []byte, alen uint32) {
	r.iov[i].Base = unsafe.SliceData(b)
	r.iov[i].SetLen(len(b))
	h := &r.h[i].hdr
	*h = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&r.addr[i])), Iov: &r.iov[i], Iovlen: 1}
	h.Namelen = alen
	r.h[i].n = 0
}

// recv blocks until at least one datagram arrives (or pollStop passes) and
// returns how many it read into the ring.
func (s *udpSock) recv(r *ring) (int, error) {
	for i := range r.h {
		r.prepare(i, r.buf[i], unix.SizeofSockaddrInet6)
		r.h[i].hdr.Control = (*byte)(unsafe.Pointer(&r.ctl[i]))
		r.h[i].hdr.SetControllen(int(unsafe.Sizeof(tsCmsg{})))
	}
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&r.h[0])), uintptr(len(r.h)), unix.MSG_WAITFORONE, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// received is when the kernel queued datagram i (zero when unknown).
func (r *ring) received(i int) time.Time {
	c := &r.ctl[i]
	if r.h[i].hdr.Controllen < uint64(unsafe.Sizeof(tsCmsg{})) || c.Level != unix.SOL_SOCKET || c.Type != unix.SCM_TIMESTAMPNS {
		return time.Time{}
	}
	return time.Unix(c.sec, c.nsec)
}

// payload and source of received datagram i.
func (r *ring) payload(i int) []byte { return r.buf[i][:r.h[i].n] }

func (r *ring) source(i int) netip.AddrPort {
	a := &r.addr[i]
	port := uint16(a.Port>>8) | uint16(a.Port<<8)
	if a.Family == unix.AF_INET {
		a4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(a))
		return netip.AddrPortFrom(netip.AddrFrom4(a4.Addr), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), port)
}

// setDest writes dst into address slot i and returns the address length.
func (s *udpSock) setDest(r *ring, i int, dst netip.AddrPort) uint32 {
	a := &r.addr[i]
	port := dst.Port()
	if !s.v6 {
		a4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(a))
		*a4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: port>>8 | port<<8, Addr: dst.Addr().Unmap().As4()}
		return unix.SizeofSockaddrInet4
	}
	*a = unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: port>>8 | port<<8, Addr: dst.Addr().As16()}
	if ip := dst.Addr(); ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		a.Scope_id = s.ifindex
	}
	return unix.SizeofSockaddrInet6
}

// sendAll sends datagrams from..n-1 queued in r with as few sendmmsg calls as
// the kernel allows; a datagram it refuses is skipped (the client retries).
func (s *udpSock) sendAll(r *ring, from, n int) error {
	var first error
	for off := from; off < n; {
		k, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&r.h[off])), uintptr(n-off), 0, 0, 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			if first == nil {
				first = errno
			}
			off++ // skip the datagram the kernel refused
		default:
			off += int(k)
		}
	}
	return first
}

// sendTo sends one datagram (answers released by a group commit).
func (s *udpSock) sendTo(b []byte, dst netip.AddrPort) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.dead {
		return net.ErrClosed
	}
	var sa unix.Sockaddr
	if !s.v6 {
		sa = &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().Unmap().As4()}
	} else {
		a := &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
		if ip := dst.Addr(); ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
			a.ZoneId = s.ifindex
		}
		sa = a
	}
	return unix.Sendto(s.fd, b, 0, sa)
}
