package firewall_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/firewall"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// topo is a router namespace with a subscriber namespace on r-sub
// (10.0.0.0/24, 2001:db8:a::/64) and an upstream one on r-up
// (192.0.2.0/24, 2001:db8:f::/64), forwarding between them.
type topo struct {
	router, sub, up, other *netns.NS
}

const (
	routerSub  = "10.0.0.1"
	subAddr    = "10.0.0.5"
	routerUp   = "192.0.2.1"
	upAddr     = "192.0.2.2"
	otherAddr  = "192.0.2.3"
	routerSub6 = "2001:db8:a::1"
	subAddr6   = "2001:db8:a::5"
	upAddr6    = "2001:db8:f::2"
)

func newTopo(t *testing.T) *topo {
	t.Helper()
	tp := &topo{router: testenv.Netns(t), sub: testenv.Netns(t), up: testenv.Netns(t), other: testenv.Netns(t)}
	link(t, tp.router, tp.sub, "r-sub", []string{routerSub + "/24", routerSub6 + "/64"}, []string{subAddr + "/24", subAddr6 + "/64"},
		[]string{routerSub, routerSub6})
	link(t, tp.router, tp.up, "r-up", []string{routerUp + "/24", "2001:db8:f::1/64"}, []string{upAddr + "/24", upAddr6 + "/64"},
		[]string{routerUp, "2001:db8:f::1"})
	link(t, tp.router, tp.other, "r-other", []string{"198.51.100.1/24"}, []string{"198.51.100.3/24"}, []string{"198.51.100.1"})
	testenv.Run(t, tp.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	testenv.Run(t, tp.router, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	return tp
}

// link joins a and b with a veth pair (name in a, name+"p" in b), gives
// both ends addresses and b default routes via gws.
func link(t *testing.T, a, b *netns.NS, name string, addrA, addrB, gws []string) {
	t.Helper()
	nl, err := a.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	peer, _ := nl.LinkByName(name + "p")
	if err := nl.LinkSetNsFd(peer, b.FD()); err != nil {
		t.Fatal(err)
	}
	nlb, err := b.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nlb.Close()
	setup := func(h *netlink.Handle, ifname string, addrs []string) {
		l, err := h.LinkByName(ifname)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range addrs {
			ad, _ := netlink.ParseAddr(s)
			ad.Flags = 0x02 // IFA_F_NODAD
			if err := h.AddrAdd(l, ad); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		lo, _ := h.LinkByName("lo")
		_ = h.LinkSetUp(lo)
	}
	setup(nl, name, addrA)
	setup(nlb, name+"p", addrB)
	for _, gw := range gws {
		fam := "-4"
		if net.ParseIP(gw).To4() == nil {
			fam = "-6"
		}
		testenv.Run(t, b, "ip", fam, "route", "replace", "default", "via", gw)
	}
}

// listen opens a TCP listener in ns on addr that accepts and holds
// connections; it is closed with the test.
func listen(t *testing.T, ns *netns.NS, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	if err := ns.Do(func() (err error) { l, err = net.Listen("tcp", addr); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { buf := make([]byte, 64); c.Read(buf); c.Close() }()
		}
	}()
	return l
}

// dial connects from ns to addr within d; nil when it connected.
func dial(ns *netns.NS, addr string, d time.Duration) error {
	var c net.Conn
	err := ns.Do(func() (err error) {
		dl := net.Dialer{Timeout: d}
		c, err = dl.Dial("tcp", addr)
		return
	})
	if err == nil {
		c.Close()
	}
	return err
}

// dialConn is dial keeping the connection open.
func dialConn(t *testing.T, ns *netns.NS, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	if err := ns.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type running struct {
	svc    *firewall.Service
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func (r *running) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

// start runs the service on ns until the test ends (or stop).
func start(t *testing.T, env *testenv.Env, ns *netns.NS, d firewall.Deps) *running {
	t.Helper()
	d.NC, d.KV, d.NS = env.NC, env.KV, ns
	if d.Log == nil {
		d.Log = testenv.Log(t)
	}
	svc, err := firewall.New(d)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{svc: svc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	t.Cleanup(r.stop)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if bus.Up(env.NC, firewall.Name, 200*time.Millisecond) {
			return r
		}
		select {
		case err := <-r.done:
			t.Fatalf("firewall exited: %v", err)
		default:
		}
	}
	t.Fatal("firewall did not start")
	return nil
}

func invoke[Req, Resp any](t *testing.T, env *testenv.Env, op api.Op[Req, Resp], in *Req) (*Resp, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return bus.Invoke(ctx, env.NC, op, in)
}

func nftList(t *testing.T, ns *netns.NS) string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed")
	}
	return testenv.Run(t, ns, "nft", "list", "table", "inet", "routerd_firewall")
}

// udpTo sends one datagram from ns to addr and reports whether listener
// (in another namespace) got it within d.
func udpRoundTrip(t *testing.T, from, to *netns.NS, listenAddr, dst string, d time.Duration) error {
	t.Helper()
	var pc net.PacketConn
	if err := to.Do(func() (err error) { pc, err = net.ListenPacket("udp", listenAddr); return }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var c net.Conn
	if err := from.Do(func() (err error) { c, err = net.Dial("udp", dst); return }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		return err
	}
	pc.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 16)
	if _, _, err := pc.ReadFrom(buf); err != nil {
		return fmt.Errorf("not received: %w", err)
	}
	return nil
}

var errConnected = errors.New("connected")

// call sends an HTTP-shaped request on op's subject and returns the status
// and the answer as a map.
func call(t *testing.T, env *testenv.Env, op api.Operation, method string, body any) (int, map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	rep, err := bus.Call(context.Background(), env.NC, op.Describe().Subject(), &pb.Request{Method: method, Args: raw, Caller: "192.0.2.200"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(rep.Body, &m); err != nil {
		t.Fatalf("%s: %v: %s", op.Describe().Name, err, rep.Body)
	}
	return rep.Status, m
}

// echo listens on a free TCP port in ns (all addresses) and echoes what
// it reads; it returns the port.
func echo(t *testing.T, ns *netns.NS, addr string) int {
	t.Helper()
	var l net.Listener
	if err := ns.Do(func() (err error) { l, err = net.Listen("tcp", addr); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 256)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// roundTrip writes on c and waits for the echo within d.
func roundTrip(c net.Conn, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	_, err := io.ReadFull(c, buf)
	return err
}
