package dhcp

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"routerd.dev/shared/netns"
)

// rcvBuf is large so a burst of requests (a PON port coming back after an
// outage, or perfdhcp) queues in the kernel instead of being dropped.
const rcvBuf = 8 << 20

// listenUDP opens a UDP socket bound to port on one interface inside ns.
// SO_BINDTODEVICE is what makes "answer only on served interfaces" hold:
// the kernel delivers nothing from any other interface to the socket, and
// SO_REUSEADDR lets one socket per interface share the port.
func listenUDP(ns *netns.NS, network, iface string, port int) (*net.UDPConn, error) {
	var conn *net.UDPConn
	err := ns.Do(func() error {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				s := int(fd)
				if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
					return
				}
				if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr != nil {
					return
				}
				if serr = unix.BindToDevice(s, iface); serr != nil {
					return
				}
				// Best effort: RCVBUFFORCE needs CAP_NET_ADMIN, fall back.
				if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
					_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
				}
			})
			if err != nil {
				return err
			}
			return serr
		}}
		addr := fmt.Sprintf("0.0.0.0:%d", port)
		if network == "udp6" {
			addr = fmt.Sprintf("[::]:%d", port)
		}
		pc, err := lc.ListenPacket(context.Background(), network, addr)
		if err != nil {
			return err
		}
		conn = pc.(*net.UDPConn)
		if network == "udp6" {
			ifi, err := net.InterfaceByName(iface)
			if err != nil {
				conn.Close()
				return err
			}
			p := ipv6.NewPacketConn(conn)
			// All_DHCP_Relay_Agents_and_Servers, where clients send.
			if err := p.JoinGroup(ifi, &net.UDPAddr{IP: net.ParseIP("ff02::1:2")}); err != nil {
				conn.Close()
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listen %s on %s: %w", network, iface, err)
	}
	return conn, nil
}
