package shaper_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	"routerd.dev/services/shaper"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// lab is the router's namespace with a subscriber behind sub0 and an
// uplink behind up0, forwarding between them.
type lab struct {
	router, sub, up *netns.NS
}

func link(t testing.TB, nl *netlink.Handle, name string) netlink.Link {
	t.Helper()
	l, err := nl.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func addr(t testing.TB, nl *netlink.Handle, l netlink.Link, a string) {
	t.Helper()
	ad, err := netlink.ParseAddr(a)
	if err != nil {
		t.Fatal(err)
	}
	ad.Flags = 0x02 // IFA_F_NODAD
	if err := nl.AddrAdd(l, ad); err != nil {
		t.Fatal(err)
	}
}

// pair makes a veth pair in r (name in r, eth0 in far) with addresses.
func pair(t testing.TB, r, far *netns.NS, name, rAddr, farAddr, farGw string) {
	t.Helper()
	rn, err := r.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer rn.Close()
	fn, err := far.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer fn.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
	if err := rn.LinkAdd(v); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	p := link(t, rn, name+"p")
	if err := rn.LinkSetNsFd(p, far.FD()); err != nil {
		t.Fatal(err)
	}
	p = link(t, fn, name+"p")
	if err := fn.LinkSetName(p, "eth0"); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		h *netlink.Handle
		n string
		a string
	}{{rn, name, rAddr}, {fn, "eth0", farAddr}} {
		l := link(t, x.h, x.n)
		addr(t, x.h, l, x.a)
		if err := x.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := fn.LinkSetUp(link(t, fn, "lo")); err != nil {
		t.Fatal(err)
	}
	gw := netlink.Route{Gw: parseIP(farGw)}
	if err := fn.RouteAdd(&gw); err != nil {
		t.Fatal(err)
	}
}

func newLab(t testing.TB) *lab {
	t.Helper()
	l := &lab{router: testenv.Netns(t), sub: testenv.Netns(t), up: testenv.Netns(t)}
	pair(t, l.router, l.sub, "sub0", "10.77.0.1/24", "10.77.0.10/24", "10.77.0.1")
	pair(t, l.router, l.up, "up0", "198.18.0.2/30", "198.18.0.1/30", "198.18.0.2")
	testenv.Run(t, l.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return l
}

// start runs the shaper in ns until the test ends and waits until it
// answers.
func start(t testing.TB, env *testenv.Env, ns *netns.NS) *shaper.Service {
	t.Helper()
	svc, err := shaper.New(shaper.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("shaper did not stop")
		}
	})
	testenv.Eventually(t, 120*time.Second, func() error {
		_, err := bus.Invoke(context.Background(), env.NC, api.ShaperStatus, &api.None{})
		return err
	})
	return svc
}

// iperf measures the rate in Mbit/s the receiver saw, from sub to up
// (reverse false: upload) or from up to sub (download).
func iperf(t testing.TB, l *lab, reverse bool) float64 {
	t.Helper()
	return iperfTo(t, l, "198.18.0.1", reverse)
}

// iperfTo is iperf to the uplink's address server (IPv4 or IPv6).
func iperfTo(t testing.TB, l *lab, server string, reverse bool) float64 {
	t.Helper()
	// iperf3 now and then ends a run reporting nothing received (its own
	// control connection, not the shaping): such a run is run again once.
	if r := iperfOnce(t, l, server, reverse); r > 0 {
		return r
	}
	return iperfOnce(t, l, server, reverse)
}

// withIPv6 gives the lab IPv6: the subscriber 2001:db8:77::10/64 behind
// sub0, the uplink 2001:db8:18::1/64 behind up0, forwarding on.
func withIPv6(t testing.TB, l *lab) {
	t.Helper()
	for _, x := range []struct {
		ns   *netns.NS
		dev  string
		addr string
	}{{l.router, "sub0", "2001:db8:77::1/64"}, {l.router, "up0", "2001:db8:18::2/64"}, {l.sub, "eth0", "2001:db8:77::10/64"}, {l.up, "eth0", "2001:db8:18::1/64"}} {
		testenv.Run(t, x.ns, "ip", "-6", "addr", "add", x.addr, "dev", x.dev, "nodad")
	}
	testenv.Run(t, l.sub, "ip", "-6", "route", "add", "default", "via", "2001:db8:77::1")
	testenv.Run(t, l.up, "ip", "-6", "route", "add", "default", "via", "2001:db8:18::2")
	testenv.Run(t, l.router, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
}

func iperfOnce(t testing.TB, l *lab, server string, reverse bool) float64 {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("kernel test: iperf3 not installed")
	}
	port := fmt.Sprint(20000 + rand.IntN(30000))
	srv := exec.Command("nsenter", "--net="+l.up.Path(), "iperf3", "-s", "-1", "-p", port, "-B", server)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	args := []string{"--net=" + l.sub.Path(), "iperf3", "-c", server, "-p", port, "-t", "4", "-O", "1", "-J"}
	if reverse {
		args = append(args, "-R")
	}
	var out []byte
	var err error
	for i := 0; i < 100; i++ { // the server needs a moment to listen
		out, err = exec.Command("nsenter", args...).Output()
		if !strings.Contains(string(out), "Connection refused") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	if res.End.SumReceived.BitsPerSecond == 0 {
		t.Logf("iperf3 reported nothing received:\n%s", out)
	}
	return res.End.SumReceived.BitsPerSecond / 1e6
}

func parseIP(s string) net.IP { return net.ParseIP(s) }
