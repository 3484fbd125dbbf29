package netcfg_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/netcfg"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// port gives ns a veth pair with addresses, as a router port would have.
func port(t *testing.T, ns *netns.NS) {
	t.Helper()
	nl, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "r0"}, PeerName: "r0p"}
	if err := nl.LinkAdd(veth); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	for _, n := range []string{"r0", "r0p", "lo"} {
		l, err := nl.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := nl.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := nl.LinkByName("r0")
	for _, a := range []string{"192.0.2.1/24", "2001:db8::1/64"} {
		addr, _ := netlink.ParseAddr(a)
		addr.Flags = 0x02 // IFA_F_NODAD: usable at once
		if err := nl.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
	}
}

type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, env *testenv.Env, ns *netns.NS) *running {
	t.Helper()
	return startWithin(t, env, ns, 20*time.Second)
}

// startWithin is start with a bound of its own (a reconcile of thousands
// of VLANs under the VM's emulation takes longer than 20 s).
func startWithin(t *testing.T, env *testenv.Env, ns *netns.NS, within time.Duration) *running {
	t.Helper()
	svc, err := netcfg.New(netcfg.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	// Ready when the endpoint answers.
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if _, err := bus.Call(context.Background(), env.NC, api.RoutesList.Subject(), &pb.Request{Method: "GET"}); err == nil {
			t.Cleanup(r.stop)
			return r
		}
		select {
		case err := <-r.done:
			t.Fatalf("netcfg exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("netcfg did not start")
	return nil
}

var stopOnce sync.Map

func (r *running) stop() {
	if _, done := stopOnce.LoadOrStore(r, true); done {
		return
	}
	r.cancel()
	<-r.done
}

func call(t *testing.T, env *testenv.Env, subject, method string, body any) (int, map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	rep, err := bus.Call(context.Background(), env.NC, subject, &pb.Request{Method: method, Args: raw, Caller: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(rep.Body, &m); err != nil {
		t.Fatal(err)
	}
	return rep.Status, m
}

func TestRoutesInKernel(t *testing.T) {
	ns := testenv.Netns(t)
	port(t, ns)
	env := testenv.Start(t)
	r := start(t, env, ns)

	add := func(body map[string]any, wantStatus int) map[string]any {
		t.Helper()
		status, m := call(t, env, api.RoutesCreate.Subject(), "POST", body)
		if status != wantStatus {
			t.Fatalf("add %v: status %d, want %d: %v", body, status, wantStatus, m)
		}
		return m
	}
	add(map[string]any{"prefix": "198.51.100.0/24", "via": "192.0.2.2", "comment": "customer"}, 201)
	add(map[string]any{"prefix": "2001:db8:5::/48", "via": "2001:db8::2", "dev": "r0"}, 201)
	add(map[string]any{"prefix": "203.0.113.0/24", "dev": "r0"}, 201)
	add(map[string]any{"prefix": "198.51.100.0/24", "via": "192.0.2.2"}, 409)
	if m := add(map[string]any{"prefix": "10.0.0.0/8", "via": "192.0.2.2", "dev": "nosuch0"}, 400); m["field"] != "dev" {
		t.Errorf("missing dev: field = %v, want dev", m["field"])
	}
	// The kernel's own refusal comes back as 500 with its text.
	m := add(map[string]any{"prefix": "10.9.0.0/16", "via": "100.64.0.1"}, 500)
	if d, _ := m["detail"].(string); !strings.Contains(d, "network is unreachable") {
		t.Errorf("kernel refusal detail = %q, want the kernel's text", d)
	}

	// netcfg's routes carry its protocol, 213 (iproute2 has no name for it).
	out := testenv.Run(t, ns, "ip", "route")
	for _, want := range []string{"198.51.100.0/24 via 192.0.2.2 dev r0 proto 213", "203.0.113.0/24 dev r0 proto 213 scope link"} {
		if !strings.Contains(out, want) {
			t.Errorf("ip route lacks %q:\n%s", want, out)
		}
	}
	if out6 := testenv.Run(t, ns, "ip", "-6", "route"); !strings.Contains(out6, "2001:db8:5::/48 via 2001:db8::2 dev r0 proto 213") {
		t.Errorf("ip -6 route lacks the managed route:\n%s", out6)
	}

	status, list := call(t, env, api.RoutesList.Subject(), "GET", nil)
	if status != 200 || list["count"].(float64) != 3 {
		t.Fatalf("list: %d %v", status, list)
	}
	live4, _ := json.Marshal(list["live_ipv4"])
	if !strings.Contains(string(live4), "198.51.100.0/24 via 192.0.2.2 dev r0 proto routerd") {
		t.Errorf("live_ipv4 = %s", live4)
	}

	// Restart: the kernel loses the routes (as after a reboot); the service
	// puts them back when it starts, and a second restore changes nothing.
	r.stop()
	testenv.Run(t, ns, "ip", "route", "del", "198.51.100.0/24")
	testenv.Run(t, ns, "ip", "-6", "route", "del", "2001:db8:5::/48")
	start(t, env, ns)
	out = testenv.Run(t, ns, "ip", "route")
	if !strings.Contains(out, "198.51.100.0/24 via 192.0.2.2 dev r0 proto 213") {
		t.Errorf("after restart the route did not come back:\n%s", out)
	}
	before := testenv.Run(t, ns, "ip", "-6", "route")
	if !strings.Contains(before, "2001:db8:5::/48") {
		t.Errorf("after restart the v6 route did not come back:\n%s", before)
	}

	// Delete narrows by prefix; a second delete is 404.
	status, m = call(t, env, api.RoutesDelete.Subject(), "DELETE", map[string]any{"prefix": "198.51.100.0/24"})
	if status != 200 || m["kernel_removed"] != true {
		t.Fatalf("delete: %d %v", status, m)
	}
	if status, _ := call(t, env, api.RoutesDelete.Subject(), "DELETE", map[string]any{"prefix": "198.51.100.0/24"}); status != 404 {
		t.Fatalf("second delete: %d, want 404", status)
	}
	if out := testenv.Run(t, ns, "ip", "route"); strings.Contains(out, "198.51.100.0/24") {
		t.Errorf("deleted route still in the kernel:\n%s", out)
	}
	_ = net.IPv4len
}

// logBuf collects a service's log for a test to read.
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond (bounded) and fails the test when it stays false.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, within, what, cond)
}

// A second replica for the same host stands by while the first serves, and
// takes over when it stops: it reconciles the kernel (removing a route of
// netcfg's protocol that is not stored) and serves the stored routes.
func TestSecondReplicaStandsByAndTakesOver(t *testing.T) {
	ns := testenv.Netns(t)
	port(t, ns)
	env := testenv.Start(t)
	first := start(t, env, ns)
	if status, m := call(t, env, api.RoutesCreate.Subject(), "POST", map[string]any{"prefix": "198.51.100.0/24", "via": "192.0.2.2"}); status != 201 {
		t.Fatalf("add: %d %v", status, m)
	}

	logs := &logBuf{}
	svc, err := netcfg.New(netcfg.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second replica's Run: %v", err)
		}
	})
	waitFor(t, "second replica says it stands by", 10*time.Second, func() bool { return strings.Contains(logs.String(), "standing by") })
	select {
	case err := <-done:
		t.Fatalf("second replica exited while the first holds the lock: %v", err)
	default:
	}

	// Left behind as if by a crash between a store delete and the kernel's.
	testenv.Run(t, ns, "ip", "route", "add", "203.0.113.0/24", "via", "192.0.2.7", "proto", "213")
	first.stop()
	waitFor(t, "second replica serves", 20*time.Second, func() bool {
		_, err := bus.Call(context.Background(), env.NC, api.RoutesList.Subject(), &pb.Request{Method: "GET"})
		return err == nil
	})
	if !strings.Contains(logs.String(), "took over") {
		t.Errorf("second replica's log does not say it took over:\n%s", logs)
	}
	out := testenv.Run(t, ns, "ip", "route")
	if strings.Contains(out, "203.0.113.0/24") || !strings.Contains(out, "198.51.100.0/24 via 192.0.2.2 dev r0 proto 213") {
		t.Errorf("after the takeover, want the stored route and not the stale one:\n%s", out)
	}
	if status, m := call(t, env, api.RoutesCreate.Subject(), "POST", map[string]any{"prefix": "198.51.101.0/24", "via": "192.0.2.2"}); status != 201 {
		t.Fatalf("add through the second replica: %d %v", status, m)
	}
}
