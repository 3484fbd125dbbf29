package cgnat_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/gateway"
	"routerd.dev/services/cgnat"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// One embedded etcd serves the whole package; each test has its own keyspace.
func TestMain(m *testing.M) { testenv.Main(m) }

const apiKey = "test-key"

// rig is the cgnat service in a namespace of its own, behind a gateway.
type rig struct {
	env   *testenv.Env
	ns    *netns.NS
	svc   *cgnat.Service
	stop  func()
	url   string
	audit string
	t     testing.TB
	// now, when set before start, is the service's clock.
	now func() time.Time
}

// link adds a veth pair inside ns, both ends up, addr on the first end.
func link(t testing.TB, ns *netns.NS, name, peer, addr string) {
	t.Helper()
	nl, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	for _, n := range []string{name, peer, "lo"} {
		l, err := nl.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := nl.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	if addr != "" {
		l, _ := nl.LinkByName(name)
		a, _ := netlink.ParseAddr(addr)
		if err := nl.AddrAdd(l, a); err != nil {
			t.Fatal(err)
		}
	}
}

func newRig(t *testing.T, ns *netns.NS) *rig {
	t.Helper()
	return newRigOn(t, ns, testenv.Start(t))
}

// newRigOn is newRig on a bus and store the test started.
func newRigOn(t *testing.T, ns *netns.NS, env *testenv.Env) *rig {
	t.Helper()
	return newRigClock(t, ns, env, nil)
}

// newRigClock is newRigOn with the service's clock (nil: time.Now).
func newRigClock(t *testing.T, ns *netns.NS, env *testenv.Env, now func() time.Time) *rig {
	t.Helper()
	r := &rig{env: env, ns: ns, audit: filepath.Join(t.TempDir(), "log", "cgnat-audit.log"), t: t, now: now}
	r.start(t)
	gw, err := gateway.New(gateway.Config{APIKey: apiKey, NC: env.NC, Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gw.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	r.url = "http://" + l.Addr().String()
	return r
}

// start (re)starts the service and waits until it answers on the bus.
func (r *rig) start(t testing.TB) {
	t.Helper()
	svc, err := cgnat.New(cgnat.Deps{NC: r.env.NC, KV: r.env.KV, NS: r.ns, AuditLog: r.audit, Log: testenv.Log(t),
		ClientsRetry: 100 * time.Millisecond, Now: r.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	r.svc = svc
	r.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(r.stop)
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, r.env.NC, cgnat.Name); missing != nil {
		select {
		case err := <-done:
			t.Fatalf("cgnat exited: %v", err)
		default:
		}
		t.Fatal("cgnat did not register")
	}
}

// do sends one request through the gateway and decodes the JSON answer.
func (r *rig) do(t testing.TB, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return testenv.Call(t, apiKey, method, r.url+path, body)
}

// want checks the status of a request and returns its answer.
func (r *rig) want(t testing.TB, status int, method, path string, body any) map[string]any {
	t.Helper()
	st, m := r.do(t, method, path, body)
	if st != status {
		t.Fatalf("%s %s %v: %d, want %d: %v", method, path, body, st, status, m)
	}
	return m
}

func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return "?" + v.Encode()
}

func (r *rig) auditText(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(r.audit)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func has(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
