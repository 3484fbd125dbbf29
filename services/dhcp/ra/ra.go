// Package ra sends IPv6 router advertisements on one served interface:
// periodic and in answer to router solicitations, with the M and O flags
// matching the DHCPv6 service, the on-link prefix, the link MTU, RDNSS and
// DNSSL.
//
// Solicitations are answered as RFC 4861 6.2.6 describes: with a multicast
// advertisement after a random delay of up to MAX_RA_DELAY_TIME (0.5 s),
// never sooner than MIN_DELAY_BETWEEN_RAS (3 s) after the previous
// multicast one, and one advertisement answers every solicitation that
// arrives while it is pending. A subscriber LAN full of hosts that all
// solicit at once (a PON port coming back) costs one advertisement, and a
// host soliciting in a loop costs at most one every 3 s.
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
	"math/rand/v2"
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
	// MTU is the link MTU announced in the MTU option (RFC 4861 4.6.4),
	// e.g. 1492; 0 omits the option. At least 1280 (the IPv6 minimum) when set.
	MTU int
}

// RFC 4861 10: router constants.
const (
	// MaxRADelay is MAX_RA_DELAY_TIME: the random delay before answering
	// a solicitation is below it.
	MaxRADelay = 500 * time.Millisecond
	// MinDelayBetweenRAs is MIN_DELAY_BETWEEN_RAS: multicast advertisements
	// on one interface are at least this far apart.
	MinDelayBetweenRAs = 3 * time.Second
	// MaxInitialAdverts and MaxInitialInterval are
	// MAX_INITIAL_RTR_ADVERTISEMENTS and MAX_INITIAL_RTR_ADVERT_INTERVAL:
	// after each of the first advertisements the next comes within 16 s.
	MaxInitialAdverts  = 3
	MaxInitialInterval = 16 * time.Second
)

// nextInterval is the time from the n-th advertisement since the interface
// started advertising (or its configuration last changed; n counts from 1)
// to the next periodic one (RFC 4861 6.2.4). It is drawn uniformly between
// MinRtrAdvInterval and max, the configured interval (MaxRtrAdvInterval),
// so routers on one link do not fall into step; after the first
// MaxInitialAdverts it is at most MaxInitialInterval, so a host that missed
// the first hears the router soon rather than after half an hour.
// MinRtrAdvInterval is the RFC's default: a third of max when max is 9 s or
// more, otherwise max. rnd(d) returns a duration in [0, d).
func nextInterval(max time.Duration, n int, rnd func(time.Duration) time.Duration) time.Duration {
	lo := max
	if max >= 9*time.Second {
		lo = max * 33 / 100
	}
	d := lo
	if max > lo {
		d += rnd(max - lo + 1)
	}
	if n <= MaxInitialAdverts && d > MaxInitialInterval {
		d = MaxInitialInterval
	}
	return d
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
	rs  chan struct{} // a valid solicitation arrived
}

var allNodes = &net.IPAddr{IP: net.ParseIP("ff02::1")}

// New opens the advertiser's socket on iface inside ns.
func New(ns *netns.NS, iface string, cfg Config, log *slog.Logger) (*Advertiser, error) {
	a := &Advertiser{iface: iface, cfg: cfg, log: log, upd: make(chan struct{}, 1), rs: make(chan struct{}, 1)}
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
			func() error { return a.p.SetControlMessage(ipv6.FlagHopLimit, true) },
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

// Update changes what is advertised and advertises it as soon as the rate
// limit allows (at once unless a multicast advertisement went out in the
// last MinDelayBetweenRAs).
func (a *Advertiser) Update(cfg Config) {
	a.mu.Lock()
	a.cfg = cfg
	a.mu.Unlock()
	select {
	case a.upd <- struct{}{}:
	default:
	}
}

func (a *Advertiser) interval() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.Interval
}

// Run advertises until ctx ends, then sends a final advertisement with a
// zero router lifetime so hosts stop using the router at once (RFC 4861
// 6.2.5; it goes out at once, outside the rate limit, as the router is
// leaving). Every advertisement is multicast and goes through one
// schedule, so periodic, solicited and updated ones share the rate limit.
// The periodic interval is random (nextInterval); the first few after the
// start or a change come within 16 s.
func (a *Advertiser) Run(ctx context.Context) {
	defer a.conn.Close()
	go a.answer(ctx)
	var s schedule
	n := 1
	a.send(false)
	s.sent(time.Now(), nextInterval(a.interval(), n, rand.N[time.Duration]))
	t := time.NewTimer(time.Until(s.due()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			a.send(true)
			return
		case <-t.C:
			if now := time.Now(); !now.Before(s.due()) {
				a.send(false)
				n++
				s.sent(now, nextInterval(a.interval(), n, rand.N[time.Duration]))
			}
		case <-a.upd:
			n = 0 // what is advertised changed: the next ones come soon again
			s.updated(time.Now())
		case <-a.rs:
			s.solicited(time.Now(), rand.N(MaxRADelay))
		}
		t.Reset(time.Until(s.due()))
	}
}

// schedule decides when the next multicast advertisement goes out (RFC
// 4861 6.2.4-6.2.6). Times are passed in, so it is tested without a clock.
type schedule struct {
	last    time.Time // the last multicast advertisement
	next    time.Time // the next periodic one
	pending time.Time // an earlier one owed to a solicitation or update; zero if none
}

// due is when the next advertisement goes out.
func (s *schedule) due() time.Time {
	if !s.pending.IsZero() && s.pending.Before(s.next) {
		return s.pending
	}
	return s.next
}

// sent records an advertisement sent at now; the periodic timer restarts
// from it (a solicited multicast one resets it, RFC 4861 6.2.6).
func (s *schedule) sent(now time.Time, interval time.Duration) {
	s.last, s.pending, s.next = now, time.Time{}, now.Add(interval)
}

// earliest is the first time a multicast advertisement may go out.
func (s *schedule) earliest(now time.Time) time.Time {
	if t := s.last.Add(MinDelayBetweenRAs); !s.last.IsZero() && now.Before(t) {
		return t
	}
	return now
}

// solicited records a solicitation received at now, delay being the
// random part (0 to MaxRADelay). A solicitation arriving while an answer
// is pending is answered by it: the delay counts from the first one.
func (s *schedule) solicited(now time.Time, delay time.Duration) {
	if !s.pending.IsZero() {
		return
	}
	t := s.earliest(now).Add(delay)
	if !t.Before(s.next) {
		return // the periodic advertisement comes first and answers it
	}
	s.pending = t
}

// updated records a configuration change at now: advertise it as soon as
// the rate limit allows.
func (s *schedule) updated(now time.Time) {
	t := s.earliest(now)
	if s.pending.IsZero() || t.Before(s.pending) {
		s.pending = t
	}
}

// answer reads router solicitations and, for each valid one (RFC 4861
// 6.1.1: hop limit 255, code 0), asks Run for an advertisement.
func (a *Advertiser) answer(ctx context.Context) {
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		n, cm, _, err := a.p.ReadFrom(buf)
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
		if n < 8 || buf[0] != byte(ipv6.ICMPTypeRouterSolicitation) || buf[1] != 0 || cm == nil || cm.HopLimit != 255 {
			continue // forged off-link, or not an RS at all (the filter passes RS only)
		}
		select {
		case a.rs <- struct{}{}:
		default: // one is already waiting to be scheduled
		}
	}
}

func (a *Advertiser) send(final bool) {
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	dst := &net.IPAddr{IP: allNodes.IP, Zone: a.iface}
	if _, err := a.p.WriteTo(Marshal(cfg, a.mac, final), nil, dst); err != nil {
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
	if cfg.MTU > 0 {
		o := make([]byte, 8)
		o[0], o[1] = 5, 1
		binary.BigEndian.PutUint32(o[4:], uint32(cfg.MTU))
		b = append(b, o...)
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
