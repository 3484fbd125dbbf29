package shaper

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"routerd.dev/shared/netns"
)

// batcher sends many class changes on one netlink socket of the target
// namespace, batchMsgs messages per sendmsg, and reads their
// acknowledgements after each batch, instead of one round trip each: what
// plans.rates does for thousands of subscribers.
type batcher struct {
	fd int
}

const batchMsgs = 128

func newBatcher(ns *netns.NS) (*batcher, error) {
	fd, err := netlinkSocket(ns, unix.NETLINK_ROUTE, 0)
	if err != nil {
		return nil, fmt.Errorf("shaper: netlink socket: %w", err)
	}
	return &batcher{fd: fd}, nil
}

func (b *batcher) close() {
	if b.fd >= 0 {
		unix.Close(b.fd)
	}
}

// htbChange is the RTM_NEWTCLASS message changing an existing HTB class
// to c's rates (no NLM_F_CREATE: a class that is gone is an error).
func htbChange(c *netlink.HtbClass) []byte {
	a := c.Attrs()
	req := nl.NewNetlinkRequest(unix.RTM_NEWTCLASS, unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(a.LinkIndex), Handle: a.Handle, Parent: a.Parent})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("htb")))
	opt := nl.TcHtbCopt{Buffer: c.Buffer, Cbuffer: c.Cbuffer, Quantum: c.Quantum, Level: c.Level, Prio: c.Prio}
	// The link layer named, so the kernel computes rates itself and needs
	// no rate tables.
	opt.Rate = nl.TcRateSpec{Rate: uint32(min(c.Rate, 1<<32-1)), Linklayer: nl.LINKLAYER_ETHERNET}
	opt.Ceil = nl.TcRateSpec{Rate: uint32(min(c.Ceil, 1<<32-1)), Linklayer: nl.LINKLAYER_ETHERNET}
	options := nl.NewRtAttr(nl.TCA_OPTIONS, nil)
	options.AddRtAttr(nl.TCA_HTB_PARMS, opt.Serialize())
	if c.Rate >= 1<<32 {
		options.AddRtAttr(nl.TCA_HTB_RATE64, nl.Uint64Attr(c.Rate))
	}
	if c.Ceil >= 1<<32 {
		options.AddRtAttr(nl.TCA_HTB_CEIL64, nl.Uint64Attr(c.Ceil))
	}
	req.AddData(options)
	return req.Serialize()
}

// changeClasses applies every change; it stops at the first batch with a
// refusal and returns how many classes were certainly changed before it.
func (b *batcher) changeClasses(cls []*netlink.HtbClass) (int, error) {
	done := 0
	buf := make([]byte, 1<<16)
	for len(cls) > 0 {
		m := min(batchMsgs, len(cls))
		var out []byte
		for _, c := range cls[:m] {
			out = append(out, htbChange(c)...)
		}
		if err := unix.Sendto(b.fd, out, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return done, fmt.Errorf("netlink send: %w", err)
		}
		var first error
		for acks := 0; acks < m; {
			n, _, err := unix.Recvfrom(b.fd, buf, 0)
			if err != nil {
				return done, fmt.Errorf("netlink receive: %w", err)
			}
			msgs, err := syscall.ParseNetlinkMessage(buf[:n])
			if err != nil {
				return done, fmt.Errorf("netlink receive: %w", err)
			}
			for _, msg := range msgs {
				if msg.Header.Type != unix.NLMSG_ERROR || len(msg.Data) < 4 {
					continue
				}
				acks++
				if code := int32(binary.NativeEndian.Uint32(msg.Data[:4])); code != 0 && first == nil {
					first = syscall.Errno(-code)
				}
			}
		}
		if first != nil {
			return done, first
		}
		done += m
		cls = cls[m:]
	}
	return done, nil
}

// netlinkSocket opens a netlink socket of protocol proto in the target
// namespace, bound, with a receive buffer of rcvbuf bytes when rcvbuf is
// not 0 (forced past the system's limit: a large answer is not dropped).
func netlinkSocket(ns *netns.NS, proto, rcvbuf int) (int, error) {
	fd := -1
	err := ns.Do(func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			unix.Close(fd)
			fd = -1
			return err
		}
		if rcvbuf > 0 {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf)
		}
		return nil
	})
	return fd, err
}
