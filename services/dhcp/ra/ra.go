// Package ra sends IPv6 router advertisements on one served interface:
// periodic and in answer to router solicitations, with the M and O flags
// matching the DHCPv6 service, the on-link prefix, RDNSS and DNSSL.
//
// The socket's ICMPv6 filter passes router solicitations only, so nothing a
// subscriber sends (its own RA above all) is ever read, and the interface's
// accept_ra is set to 0 in the target namespace so the kernel does not learn
// a default route or prefix from a subscriber either.
package ra

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"routerd.dev/shared/netns"
)

// Config is what one interface advertises.
type Config struct {
	Prefix         netip.Prefix
	Managed, Other bool // M and O flags
	SLAAC          bool // A flag on the prefix
	RouterLifetime time.Duration
	Interval       time.Duration
	Valid          time.Duration
	Preferred      time.Duration
	DNS            []netip.Addr
	Domain         string
}

// Advertiser sends advertisements on one interface.
type Advertiser struct {
	iface string
	mac   net.HardwareAddr
	conn  *net.IPConn
	p     *ipv6.PacketConn
	log   *slog.Logger

	mu  sync.Mutex
	cfg Config
	upd chan struct{}
}

var allNodes = &net.IPAddr{IP: net.ParseIP("ff02::1")}

// New opens the advertiser's socket on iface inside ns.
func New(ns *netns.NS, iface string, cfg Config, log *slog.Logger) (*Advertiser, error) {
	a := &Advertiser{iface: iface, cfg: cfg, log: log, upd: make(chan struct{}, 1)}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		a.mac = ifi.HardwareAddr
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) { serr = unix.BindToDevice(int(fd), iface) }); err != nil {
				return err
			}
			return serr
		}}
		pc, err := lc.ListenPacket(context.Background(), "ip6:ipv6-icmp", "::")
		if err != nil {
			return err
		}
		c := pc.(*net.IPConn)
		a.conn = c
		a.p = ipv6.NewPacketConn(c)
		var f ipv6.ICMPFilter
		f.SetAll(true)
		f.Accept(ipv6.ICMPTypeRouterSolicitation)
		for _, step := range []func() error{
			func() error { return a.p.SetICMPFilter(&f) },
			func() error { return a.p.SetMulticastHopLimit(255) },
			func() error { return a.p.SetHopLimit(255) },
			func() error { return a.p.SetMulticastInterface(ifi) },
			func() error { return a.p.SetMulticastLoopback(false) },
			func() error { return a.p.JoinGroup(ifi, &net.IPAddr{IP: net.ParseIP("ff02::2")}) },
		} {
			if err := step(); err != nil {
				c.Close()
				return err
			}
		}
		// Best effort: a kernel without IPv6 on this interface has no file.
		path := fmt.Sprintf("/proc/sys/net/ipv6/conf/%s/accept_ra", iface)
		if err := os.WriteFile(path, []byte("0"), 0o644); err != nil {
			log.Warn("cannot switch off accept_ra", "iface", iface, "err", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("router advertisements on %s: %w", iface, err)
	}
	return a, nil
}

// Update changes what is advertised and sends an advertisement at once.
func (a *Advertiser) Update(cfg Config) {
	a.mu.Lock()
	a.cfg = cfg
	a.mu.Unlock()
	select {
	case a.upd <- struct{}{}:
	default:
	}
}

// Run advertises until ctx ends, then sends a final advertisement with a
// zero router lifetime so hosts stop using the router at once (RFC 4861 6.2.5).
func (a *Advertiser) Run(ctx context.Context) {
	defer a.conn.Close()
	go a.answer(ctx)
	a.send(allNodes, false)
	for {
		a.mu.Lock()
		iv := a.cfg.Interval
		a.mu.Unlock()
		t := time.NewTimer(iv)
		select {
		case <-ctx.Done():
			t.Stop()
			a.send(allNodes, true)
			return
		case <-t.C:
		case <-a.upd:
			t.Stop()
		}
		a.send(allNodes, false)
	}
}

// answer reads router solicitations and answers each one unicast (or to
// all nodes when the solicitor has no address yet).
func (a *Advertiser) answer(ctx context.Context) {
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		n, _, src, err := a.p.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if n < 8 || buf[0] != byte(ipv6.ICMPTypeRouterSolicitation) {
			continue // the filter should make this unreachable
		}
		dst := allNodes
		if ip, ok := src.(*net.IPAddr); ok && !ip.IP.IsUnspecified() {
			dst = &net.IPAddr{IP: ip.IP, Zone: a.iface}
		}
		a.send(dst, false)
	}
}

func (a *Advertiser) send(dst *net.IPAddr, final bool) {
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	d := *dst
	if d.Zone == "" {
		d.Zone = a.iface
	}
	if _, err := a.p.WriteTo(Marshal(cfg, a.mac, final), nil, &d); err != nil {
		a.log.Debug("send router advertisement", "iface", a.iface, "err", err)
	}
}

// Marshal builds the ICMPv6 router advertisement (the kernel fills in the
// checksum on an ICMPv6 raw socket).
func Marshal(cfg Config, mac net.HardwareAddr, final bool) []byte {
	b := make([]byte, 16, 128)
	b[0] = byte(ipv6.ICMPTypeRouterAdvertisement)
	b[4] = 64 // current hop limit
	if cfg.Managed {
		b[5] |= 0x80
	}
	if cfg.Other {
		b[5] |= 0x40
	}
	life := uint16(cfg.RouterLifetime / time.Second)
	if final {
		life = 0
	}
	binary.BigEndian.PutUint16(b[6:], life)
	if len(mac) == 6 {
		b = append(b, 1, 1)
		b = append(b, mac...)
	}
	if cfg.Prefix.IsValid() {
		o := make([]byte, 32)
		o[0], o[1], o[2] = 3, 4, byte(cfg.Prefix.Bits())
		o[3] = 0x80 // on-link
		if cfg.SLAAC {
			o[3] |= 0x40
		}
		binary.BigEndian.PutUint32(o[4:], uint32(cfg.Valid/time.Second))
		binary.BigEndian.PutUint32(o[8:], uint32(cfg.Preferred/time.Second))
		p := cfg.Prefix.Masked().Addr().As16()
		copy(o[16:], p[:])
		b = append(b, o...)
	}
	lifetime := uint32(3 * cfg.Interval / time.Second)
	if len(cfg.DNS) > 0 {
		o := make([]byte, 8, 8+16*len(cfg.DNS))
		o[0], o[1] = 25, byte(1+2*len(cfg.DNS))
		binary.BigEndian.PutUint32(o[4:], lifetime)
		for _, d := range cfg.DNS {
			x := d.As16()
			o = append(o, x[:]...)
		}
		b = append(b, o...)
	}
	if cfg.Domain != "" {
		var names []byte
		for _, label := range strings.Split(strings.Trim(cfg.Domain, "."), ".") {
			if len(label) == 0 || len(label) > 63 {
				names = nil
				break
			}
			names = append(append(names, byte(len(label))), label...)
		}
		if names != nil {
			names = append(names, 0)
			for (8+len(names))%8 != 0 {
				names = append(names, 0)
			}
			o := make([]byte, 8, 8+len(names))
			o[0], o[1] = 31, byte((8+len(names))/8)
			binary.BigEndian.PutUint32(o[4:], lifetime)
			b = append(b, append(o, names...)...)
		}
	}
	return b
}
