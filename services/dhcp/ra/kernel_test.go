package ra

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/ipv6"

	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// link is a router namespace and a host namespace joined by a veth pair
// (rtr0 on the router, host0 on the host), both made by the test.
type link struct {
	router, host *netns.NS
}

func newLink(t *testing.T) *link {
	t.Helper()
	l := &link{router: testenv.Netns(t), host: testenv.Netns(t)}
	for _, ns := range []*netns.NS{l.router, l.host} {
		// Link-local addresses usable at once: no duplicate detection.
		testenv.Run(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
		testenv.Run(t, ns, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
	}
	nl, err := l.router.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "rtr0"}, PeerName: "host0"}); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	peer, err := nl.LinkByName("host0")
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.LinkSetNsFd(peer, l.host.FD()); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, l.router, "ip", "link", "set", "rtr0", "up")
	testenv.Run(t, l.host, "ip", "link", "set", "host0", "up")
	for _, side := range []struct {
		ns  *netns.NS
		dev string
	}{{l.router, "rtr0"}, {l.host, "host0"}} {
		testenv.Eventually(t, 5*time.Second, func() error {
			out := testenv.Run(t, side.ns, "ip", "-6", "addr", "show", "dev", side.dev, "scope", "link")
			if !strings.Contains(out, "fe80::") || strings.Contains(out, "tentative") {
				return fmt.Errorf("no link-local address on %s:\n%s", side.dev, out)
			}
			return nil
		})
	}
	return l
}

// advertise runs an advertiser on rtr0 until the test ends.
func (l *link) advertise(t *testing.T, cfg Config) *Advertiser {
	t.Helper()
	a, err := New(l.router, "rtr0", cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

func testConfig() Config {
	return Config{Prefix: netip.MustParsePrefix("2001:db8:77::/64"), Managed: true, RouterLifetime: 1800 * time.Second,
		Interval: 1800 * time.Second, Valid: 4000 * time.Second, Preferred: 2000 * time.Second}
}

// rdisc6 in the host namespace reads the MTU option; a configuration
// without an MTU sends none.
func TestKernelMTU(t *testing.T) {
	t.Parallel() // own namespaces and keyspace; mostly waits on clients and timers
	if _, err := exec.LookPath("rdisc6"); err != nil {
		t.Skip("kernel test: rdisc6 (package ndisc6) not installed")
	}
	l := newLink(t)
	cfg := testConfig()
	cfg.MTU = 1492
	a := l.advertise(t, cfg)
	out := testenv.Run(t, l.host, "rdisc6", "-1", "-w", "3000", "host0")
	if !strings.Contains(out, "MTU") || !strings.Contains(out, "1492 bytes") {
		t.Errorf("rdisc6 does not show the MTU 1492:\n%s", out)
	}
	if !strings.Contains(out, "2001:db8:77::/64") {
		t.Errorf("rdisc6 does not show the prefix:\n%s", out)
	}

	cfg.MTU = 0
	a.Update(cfg) // goes out once the rate limit allows; rdisc6 waits for it
	out = testenv.Run(t, l.host, "rdisc6", "-1", "-w", "3000", "host0")
	if strings.Contains(out, "MTU") {
		t.Errorf("MTU option sent with MTU 0:\n%s", out)
	}
}

// host is a raw ICMPv6 socket on host0 that sends router solicitations and
// notes when advertisements arrive.
type host struct {
	p  *ipv6.PacketConn
	mu sync.Mutex
	ra []time.Time
}

func (l *link) newHost(t *testing.T) *host {
	t.Helper()
	h := &host{}
	err := l.host.Do(func() error {
		c, err := net.ListenPacket("ip6:ipv6-icmp", "::")
		if err != nil {
			return err
		}
		h.p = ipv6.NewPacketConn(c)
		var f ipv6.ICMPFilter
		f.SetAll(true)
		f.Accept(ipv6.ICMPTypeRouterAdvertisement)
		if err := h.p.SetICMPFilter(&f); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName("host0")
		if err != nil {
			return err
		}
		return h.p.SetMulticastInterface(ifi)
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 1500)
		for {
			n, _, _, err := h.p.ReadFrom(b)
			if err != nil {
				return
			}
			if n >= 16 && b[0] == byte(ipv6.ICMPTypeRouterAdvertisement) {
				h.mu.Lock()
				h.ra = append(h.ra, time.Now())
				h.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { h.p.Close(); <-done })
	return h
}

// solicit sends a router solicitation to all routers with hop limit hops
// (255 is the only valid one).
func (h *host) solicit(t *testing.T, hops int) {
	t.Helper()
	if err := h.p.SetMulticastHopLimit(hops); err != nil {
		t.Fatal(err)
	}
	rs := []byte{byte(ipv6.ICMPTypeRouterSolicitation), 0, 0, 0, 0, 0, 0, 0}
	if _, err := h.p.WriteTo(rs, nil, &net.IPAddr{IP: net.ParseIP("ff02::2"), Zone: "host0"}); err != nil {
		t.Fatal(err)
	}
}

// since returns the advertisements that arrived after from.
func (h *host) since(from time.Time) []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []time.Duration
	for _, at := range h.ra {
		if at.After(from) {
			out = append(out, at.Sub(from))
		}
	}
	return out
}

// waitRA waits (bounded) for the n-th advertisement after from.
func (h *host) waitRA(t *testing.T, from time.Time, n int, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	// The arrival times are taken by the reader, so how often this polls
	// does not change what it returns.
	testenv.Eventually(t, within, func() error {
		got := h.since(from)
		if len(got) < n {
			return fmt.Errorf("advertisement %d did not arrive (got %v)", n, got)
		}
		at = from.Add(got[n-1])
		return nil
	})
	return at
}

// A host soliciting 20 times in a second, right after an advertisement,
// gets one multicast answer, 3 s after the previous advertisement plus at
// most MaxRADelay; on a quiet link a solicitation is answered within
// MaxRADelay; a solicitation with a hop limit other than 255 is ignored.
func TestKernelSolicitedRateLimit(t *testing.T) {
	t.Parallel() // own namespaces and keyspace; mostly waits on clients and timers
	l := newLink(t)
	h := l.newHost(t)
	start := time.Now()
	l.advertise(t, testConfig())
	first := h.waitRA(t, start, 1, 5*time.Second) // the advertisement at start

	for i := 0; i < 20; i++ {
		h.solicit(t, 255)
		time.Sleep(50 * time.Millisecond) // the pace is the test: 20 in a second
	}
	answer := h.waitRA(t, first, 1, MinDelayBetweenRAs+MaxRADelay+2*time.Second)
	const slack = 250 * time.Millisecond // scheduling on a loaded machine
	if gap := answer.Sub(first); gap < MinDelayBetweenRAs-slack/5 || gap > MinDelayBetweenRAs+MaxRADelay+slack {
		t.Errorf("answer %v after the previous advertisement, want %v to %v", gap, MinDelayBetweenRAs, MinDelayBetweenRAs+MaxRADelay)
	}
	// No event says "no more advertisements": wait out the rate limit
	// and a margin, then count.
	time.Sleep(MinDelayBetweenRAs + time.Second)
	if got := h.since(first); len(got) != 1 {
		t.Fatalf("20 solicitations got %d advertisements (at %v), want 1", len(got), got)
	}

	// The link has been quiet for over 3 s: a forged (off-link) solicitation
	// is ignored, a valid one answered at once.
	forged := time.Now()
	h.solicit(t, 64)
	time.Sleep(MaxRADelay + slack) // what is checked is that no answer comes in this time
	if got := h.since(forged); len(got) != 0 {
		t.Fatalf("a solicitation with hop limit 64 was answered (%v)", got)
	}
	asked := time.Now()
	h.solicit(t, 255)
	if d := h.waitRA(t, asked, 1, 2*time.Second).Sub(asked); d > MaxRADelay+slack {
		t.Errorf("on a quiet link the answer took %v, want under %v", d, MaxRADelay)
	}
}
