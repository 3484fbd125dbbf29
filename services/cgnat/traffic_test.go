package cgnat_test

import (
	"io"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// lab is the router's namespace between a subscriber's and an uplink's,
// joined by veth pairs, as in routerd --lab.
type lab struct {
	router, sub, up *netns.NS
}

func pair(t *testing.T, router, far *netns.NS, name, routerAddr, farAddr string) {
	t.Helper()
	nl, err := router.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	peer, _ := nl.LinkByName(name + "p")
	if err := nl.LinkSetNsFd(peer, far.FD()); err != nil {
		t.Fatal(err)
	}
	l, _ := nl.LinkByName(name)
	a, _ := netlink.ParseAddr(routerAddr)
	if err := nl.AddrAdd(l, a); err != nil {
		t.Fatal(err)
	}
	if err := nl.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	fl, err := far.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	p, _ := fl.LinkByName(name + "p")
	for _, s := range strings.Split(farAddr, ",") {
		a, _ := netlink.ParseAddr(s)
		if err := fl.AddrAdd(p, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := fl.LinkSetUp(p); err != nil {
		t.Fatal(err)
	}
	lo, _ := fl.LinkByName("lo")
	fl.LinkSetUp(lo)
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{router: testenv.Netns(t), sub: testenv.Netns(t), up: testenv.Netns(t)}
	pair(t, l.router, l.sub, "sub0", "10.77.0.1/24", "10.77.0.50/24,10.77.0.200/24")
	pair(t, l.router, l.up, "up0", "198.18.0.2/30", "198.18.0.1/30")
	testenv.Run(t, l.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	testenv.Run(t, l.sub, "ip", "route", "add", "default", "via", "10.77.0.1")
	// The uplink routes the public pools (and the exempt network) back to
	// the router, as an upstream announcing them would.
	for _, p := range []string{"203.0.113.0/24", "198.51.100.0/24", "10.77.0.0/24"} {
		testenv.Run(t, l.up, "ip", "route", "add", p, "via", "198.18.0.2")
	}
	return l
}

// seen is what a server in the uplink namespace saw: the source address
// and port of each connection or datagram.
type seen struct{ c chan netip.AddrPort }

func (s seen) next(t *testing.T) netip.AddrPort {
	t.Helper()
	select {
	case a := <-s.c:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("nothing arrived at the server")
	}
	return netip.AddrPort{}
}

// serve listens on TCP and UDP at addr inside ns and reports each peer.
func serve(t *testing.T, ns *netns.NS, addr string) seen {
	t.Helper()
	s := seen{c: make(chan netip.AddrPort, 16)}
	var tl net.Listener
	var ul net.PacketConn
	if err := ns.Do(func() error {
		var err error
		if tl, err = net.Listen("tcp", addr); err != nil {
			return err
		}
		ul, err = net.ListenPacket("udp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close(); ul.Close() })
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			s.c <- c.RemoteAddr().(*net.TCPAddr).AddrPort()
			io.WriteString(c, "hello\n")
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := ul.ReadFrom(buf)
			if err != nil {
				return
			}
			s.c <- from.(*net.UDPAddr).AddrPort()
			ul.WriteTo(buf[:n], from)
		}
	}()
	return s
}

// dial connects from ns (from the source address src when not empty) and
// reads the answer.
func dial(t *testing.T, ns *netns.NS, network, src, addr string) {
	t.Helper()
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: 3 * time.Second}
		if src != "" {
			ip := net.ParseIP(src)
			if network == "tcp" {
				d.LocalAddr = &net.TCPAddr{IP: ip}
			} else {
				d.LocalAddr = &net.UDPAddr{IP: ip}
			}
		}
		c, err := d.Dial(network, addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if network == "udp" {
			if _, err := c.Write([]byte("ping")); err != nil {
				return err
			}
		}
		buf := make([]byte, 16)
		_, err = c.Read(buf)
		return err
	})
	if err != nil {
		t.Fatalf("%s from %s to %s: %v", network, src, addr, err)
	}
}

// TestCGNATTraffic sends a subscriber's TCP, UDP and ICMP through the
// router namespace and looks at what the uplink sees: a NAT pool's range,
// then the subscriber's CGNAT address with ports inside its block (and the
// lookup of the observed address and port names it), an exempt source
// untranslated, and a port forward reached from the uplink.
func TestCGNATTraffic(t *testing.T) {
	l := newLab(t)
	r := newRig(t, l.router)
	srv := serve(t, l.up, "198.18.0.1:7000")

	// A NAT pool on the uplink translates to its range.
	r.want(t, 201, "POST", "/nat", map[string]any{"iface": "up0", "pool_start": "198.51.100.10", "pool_end": "198.51.100.11"})
	dial(t, l.sub, "tcp", "", "198.18.0.1:7000")
	if a := srv.next(t); a.Addr().String() != "198.51.100.10" && a.Addr().String() != "198.51.100.11" {
		t.Fatalf("NAT pool: the uplink saw %s", a)
	}

	// CGNAT: the subscriber arrives through the client.added event (as
	// the subscribers service publishes it).
	r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": true, "iface": "up0", "pool": "203.0.113.1-203.0.113.4",
		"block_size": 4096, "exempt": "10.77.0.192/26"})
	subs := bus.NewPublisher(r.env.NC, "subscribers", testenv.Log(t))
	subs.Publish(api.ClientAdded, nil, api.Client{MAC: "02:00:00:00:00:50", IP: "10.77.0.50", Hostname: "alice", Iface: "sub0"})
	testenv.WaitFor(t, 5*time.Second, "the slot of the event's client", func() bool {
		_, m := r.do(t, "GET", "/cgnat", nil)
		return m["assigned"].(float64) == 1
	})
	lk := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.1", "port", "1024"), nil)
	if lk["mac"] != "02:00:00:00:00:50" {
		t.Fatalf("slot 0: %v", lk)
	}
	start, end := int(lk["port_start"].(float64)), int(lk["port_end"].(float64))
	for _, network := range []string{"tcp", "udp", "tcp", "udp"} {
		dial(t, l.sub, network, "10.77.0.50", "198.18.0.1:7000")
		a := srv.next(t)
		if a.Addr().String() != "203.0.113.1" || int(a.Port()) < start || int(a.Port()) > end {
			t.Fatalf("%s: the uplink saw %s, want 203.0.113.1 port %d-%d", network, a, start, end)
		}
		m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", a.Addr().String(), "port", strconv.Itoa(int(a.Port()))), nil)
		if m["found"] != true || m["mac"] != "02:00:00:00:00:50" || m["private_ip"] != "10.77.0.50" || m["hostname"] != "alice" {
			t.Fatalf("lookup of %s (%s): %v", a, network, m)
		}
		t.Logf("%s seen at the uplink as %s, lookup names %s", network, a, m["mac"])
	}
	// ICMP: the echo's query id is translated into the block too.
	testenv.Run(t, l.sub, "ping", "-c", "1", "-W", "3", "-I", "10.77.0.50", "198.18.0.1")
	ct := testenv.Run(t, l.router, "conntrack", "-L", "-p", "icmp")
	mm := regexp.MustCompile(`src=198\.18\.0\.1 dst=203\.0\.113\.1 type=0 code=0 id=(\d+)`).FindStringSubmatch(ct)
	if mm == nil {
		t.Fatalf("no translated echo in conntrack:\n%s", ct)
	}
	if id, _ := strconv.Atoi(mm[1]); id < start || id > end {
		t.Fatalf("ICMP id %d outside the block %d-%d:\n%s", id, start, end, ct)
	}
	// Another protocol (253, experimentation): the address translated,
	// seen by a raw socket at the uplink.
	var raw net.PacketConn
	if err := l.up.Do(func() error {
		var err error
		raw, err = net.ListenPacket("ip4:253", "198.18.0.1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := l.sub.Do(func() error {
		c, err := net.ListenPacket("ip4:253", "10.77.0.50")
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WriteTo([]byte("experiment"), &net.IPAddr{IP: net.ParseIP("198.18.0.1")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	if _, from, err := raw.ReadFrom(buf); err != nil || from.String() != "203.0.113.1" {
		t.Fatalf("protocol 253 at the uplink: from %v, %v", from, err)
	}
	// An exempt source leaves untranslated.
	dial(t, l.sub, "tcp", "10.77.0.200", "198.18.0.1:7000")
	if a := srv.next(t); a.Addr().String() != "10.77.0.200" {
		t.Fatalf("exempt source: the uplink saw %s", a)
	}

	// A port forward, reached from the uplink namespace.
	in := serve(t, l.sub, "10.77.0.50:80")
	r.want(t, 201, "POST", "/pf", map[string]any{"public_port": 8080, "client_ip": "10.77.0.50", "client_port": 80})
	dial(t, l.up, "tcp", "", "198.18.0.2:8080")
	if a := in.next(t); a.Addr().String() != "198.18.0.1" {
		t.Fatalf("forward: the client saw %s", a)
	}
	r.want(t, 201, "POST", "/pf", map[string]any{"proto": "udp", "public_ip": "198.18.0.2", "public_port": 5353, "client_ip": "10.77.0.50", "client_port": 80})
	dial(t, l.up, "udp", "", "198.18.0.2:5353")
	if a := in.next(t); a.Addr().String() != "198.18.0.1" {
		t.Fatalf("udp forward: the client saw %s", a)
	}
	// The released subscriber's element goes: its traffic no longer gets
	// its block (it falls to the NAT pool).
	if ct := testenv.Run(t, l.router, "conntrack", "-L", "-s", "10.77.0.50"); !strings.Contains(ct, "src=10.77.0.50") {
		t.Fatalf("no flow of the subscriber before its release:\n%s", ct)
	}
	subs.Publish(api.ClientDeleted, nil, api.Client{MAC: "02:00:00:00:00:50", IP: "10.77.0.50"})
	testenv.WaitFor(t, 5*time.Second, "the release", func() bool {
		_, m := r.do(t, "GET", "/cgnat", nil)
		return m["assigned"].(float64) == 0
	})
	// Its flows went with the mapping (the block may be someone else's
	// now): no conntrack entry from its address is left.
	if ct := testenv.Run(t, l.router, "conntrack", "-L", "-s", "10.77.0.50"); strings.Contains(ct, "src=10.77.0.50") {
		t.Fatalf("flows of the released mapping left:\n%s", ct)
	}
	dial(t, l.sub, "tcp", "10.77.0.50", "198.18.0.1:7000")
	if a := srv.next(t); !strings.HasPrefix(a.Addr().String(), "198.51.100.") {
		t.Fatalf("after release: the uplink saw %s", a)
	}
}
