package netcfg_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/vishvananda/netlink"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
	"routerd.dev/services/netcfg"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// netRig is one netcfg with its own state and rendered-files directories.
type netRig struct {
	t     *testing.T
	env   *testenv.Env
	ns    *netns.NS
	state string
	run   *running
}

func (r *netRig) start(confirm time.Duration) {
	r.t.Helper()
	svc, err := netcfg.New(netcfg.Deps{NC: r.env.NC, KV: r.env.KV, NS: r.ns, Log: testenv.Log(r.t),
		StateDir: r.state, Confirm: confirm, ListenIP: "0.0.0.0"})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- svc.Run(ctx) }()
	r.t.Cleanup(run.stop)
	testenv.WaitFor(r.t, 20*time.Second, "netcfg serves", func() bool {
		_, err := bus.Call(context.Background(), r.env.NC, api.NetworkGet.Subject(), &pb.Request{Method: "GET"})
		return err == nil
	})
	r.run = run
}

func (r *netRig) do(op interface{ Subject() string }, body any, want int) map[string]any {
	r.t.Helper()
	status, m := call(r.t, r.env, op.Subject(), "POST", body)
	if status != want {
		r.t.Fatalf("%s %v: status %d, want %d: %v", op.Subject(), body, status, want, m)
	}
	return m
}

func (r *netRig) version() string {
	r.t.Helper()
	m := r.do(api.NetworkGet, nil, 200)
	v, _ := m["version"].(string)
	return v
}

func (r *netRig) link(name string) netlink.Link {
	r.t.Helper()
	nl, err := r.ns.Netlink()
	if err != nil {
		r.t.Fatal(err)
	}
	defer nl.Close()
	l, err := nl.LinkByName(name)
	if err != nil {
		r.t.Fatal(err)
	}
	return l
}

func (r *netRig) file(name string) string {
	raw, _ := os.ReadFile(filepath.Join(r.state, "network", name))
	return string(raw)
}

// veth adds a pair without addresses, both ends up.
func veth(t *testing.T, ns *netns.NS, a, b string) {
	t.Helper()
	nl, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b}); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	for _, n := range []string{a, b} {
		l, _ := nl.LinkByName(n)
		_ = nl.LinkSetUp(l)
	}
}

// TestNetworkApplyConfirmRollback drives the whole timed apply on the host
// kernel with veth ports: adopt, plan (and its 400s and 409), apply,
// second apply 409, confirm, rollback by request, by the timer, and at a
// restart; the kernel, the rendered files and the stored document follow.
func TestNetworkApplyConfirmRollback(t *testing.T) {
	ns := testenv.Netns(t)
	port(t, ns)
	veth(t, ns, "p1", "p1x")
	r := &netRig{t: t, env: testenv.Start(t), ns: ns, state: t.TempDir()}
	var evMu sync.Mutex
	var events []string
	sub, err := r.env.NC.Subscribe(event.Subject("netcfg", "network.>"), func(m *nats.Msg) {
		var e event.Event
		var d struct {
			Why string `json:"why"`
		}
		_ = json.Unmarshal(m.Data, &e)
		_ = json.Unmarshal(e.Data, &d)
		evMu.Lock()
		events = append(events, strings.TrimSuffix(e.Kind+" "+d.Why, " "))
		evMu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	r.start(10 * time.Second)

	m := r.do(api.NetworkGet, nil, 200)
	if m["managed"] != false || m["version"] != "" || m["pending"] != nil {
		t.Fatalf("before adopt: %v", m)
	}
	if m := r.do(api.NetworkPlanOp, map[string]any{"ports": map[string]any{"p1": map[string]any{"mtu": 9000}}}, 400); m["problems"] == nil {
		t.Fatalf("plan with nothing stored: %v", m)
	}
	r.do(api.NetworkAdoptOp, map[string]any{}, 201)
	r.do(api.NetworkAdoptOp, map[string]any{}, 409)
	m = r.do(api.NetworkGet, nil, 200)
	cfg, _ := json.Marshal(m["config"])
	if m["managed"] != true || !strings.Contains(string(cfg), `"name":"p1"`) || !strings.Contains(string(cfg), `"name":"r0"`) {
		t.Fatalf("after adopt: %v", m)
	}
	var kinds = map[string]string{}
	for _, i := range m["interfaces"].([]any) {
		rec := i.(map[string]any)
		kinds[rec["name"].(string)] = rec["kind"].(string)
		if rec["name"] == "p1" && (rec["configured"] != true || rec["owner"] != "network" || rec["driver"] != "veth") {
			t.Errorf("p1 record: %v", rec)
		}
	}
	if kinds["p1"] != "port" || kinds["lo"] != "other" {
		t.Errorf("kinds: %v", kinds)
	}
	if !strings.Contains(r.file("10-routerd-p1.network"), "Name=p1") {
		t.Errorf("adopt rendered no file for p1: %q", r.file("10-routerd-p1.network"))
	}
	v1 := r.version()

	// Plan: a dry run, its refusals and 400s.
	p := r.do(api.NetworkPlanOp, map[string]any{"version": v1, "ports": map[string]any{"p1": map[string]any{"mtu": 9000}}}, 200)
	if ch := toStrings(p["changes"]); len(ch) != 1 || ch[0] != "port p1: mtu default -> 9000" || !strings.Contains(p["report"].(string), "+") {
		t.Fatalf("plan: %v", p)
	}
	if r.link("p1").Attrs().MTU != 1500 {
		t.Fatal("plan changed the kernel")
	}
	for _, bad := range []map[string]any{
		{"ports": map[string]any{"p1": map[string]any{"mtu": 100}}},
		{"ports": map[string]any{"nosuch": map[string]any{"up": true}}},
		{"ports": map[string]any{"r0": map[string]any{"remove": true}}}, // carries addresses
		{"bonds": map[string]any{"bond0": map[string]any{"members": []string{"p1"}, "mode": "balance-rr", "params": map[string]any{"lacp-rate": "fast"}}}},
		{"bonds": map[string]any{"bond0": map[string]any{"members": []string{"p1"}, "mode": "nosuch"}}},
		{"bonds": map[string]any{"bond0": map[string]any{"members": []string{"r0"}, "mode": "802.3ad"}}}, // member with addresses
		{"bonds": map[string]any{"bond0": map[string]any{"members": []string{"p1"}, "mode": "802.3ad", "params": map[string]any{"mii-monitor-interval": 20000}}}},
		{"ports": map[string]any{"p1": map[string]any{"mtu": nil}}}, // nothing changes
	} {
		if m := r.do(api.NetworkPlanOp, bad, 400); m["problems"] == nil {
			t.Errorf("plan %v: no problems: %v", bad, m)
		}
	}
	if m := r.do(api.NetworkPlanOp, map[string]any{"version": "abc123", "ports": map[string]any{"p1": map[string]any{"mtu": 9000}}}, 409); m["version"] != v1 {
		t.Errorf("stale plan: %v", m)
	}
	// A valid bond plan (bonds run in the full-kernel tier).
	p = r.do(api.NetworkPlanOp, map[string]any{"bonds": map[string]any{"bond0": map[string]any{"members": []string{"p1"}, "mode": "802.3ad",
		"params": map[string]any{"lacp-rate": "fast", "transmit-hash-policy": "layer3+4", "mii-monitor-interval": 100}}}}, 200)
	if len(toStrings(p["changes"])) < 3 {
		t.Errorf("bond plan: %v", p)
	}

	// Apply, a second apply, confirm.
	r.do(api.NetworkApplyOp, map[string]any{"ports": map[string]any{"p1": map[string]any{"mtu": 9000}}}, 400) // no version
	a := r.do(api.NetworkApplyOp, map[string]any{"version": v1, "ports": map[string]any{"p1": map[string]any{"mtu": 9000}}}, 200)
	if a["deadline"] == nil || a["pending"].(float64) < 1 || !strings.Contains(a["text"].(string), "confirm") {
		t.Fatalf("apply: %v", a)
	}
	if mtu := r.link("p1").Attrs().MTU; mtu != 9000 {
		t.Fatalf("after apply p1 mtu %d", mtu)
	}
	if !strings.Contains(r.file("10-routerd-p1.network"), "MTUBytes=9000") {
		t.Errorf("rendered file: %q", r.file("10-routerd-p1.network"))
	}
	if _, err := os.Stat(filepath.Join(r.state, "pending.json")); err != nil {
		t.Errorf("no pending state on disk: %v", err)
	}
	v2 := r.version()
	if m := r.do(api.NetworkApplyOp, map[string]any{"version": v2, "ports": map[string]any{"p1": map[string]any{"up": false}}}, 409); m["left_s"] == nil {
		t.Errorf("second apply: %v", m)
	}
	if m := r.do(api.NetworkGet, nil, 200); m["pending"] == nil {
		t.Errorf("GET /network while pending: %v", m["pending"])
	}
	r.do(api.NetworkConfirmOp, nil, 200)
	r.do(api.NetworkConfirmOp, nil, 400)
	r.do(api.NetworkRollbackOp, nil, 400)
	time.Sleep(11 * time.Second) // past the window: the confirmed change stays
	if mtu := r.link("p1").Attrs().MTU; mtu != 9000 || r.version() != v2 {
		t.Fatalf("confirmed change did not stay: mtu %d", mtu)
	}

	// Rollback by request.
	r.do(api.NetworkApplyOp, map[string]any{"version": v2, "ports": map[string]any{"p1": map[string]any{"up": false}}}, 200)
	if r.link("p1").Attrs().Flags&net.FlagUp != 0 {
		t.Fatal("p1 still up after apply")
	}
	r.do(api.NetworkRollbackOp, nil, 200)
	if r.link("p1").Attrs().Flags&net.FlagUp == 0 || r.version() != v2 {
		t.Fatal("rollback did not bring p1 up and the document back")
	}

	// Rolled back by the timer.
	r.do(api.NetworkApplyOp, map[string]any{"version": v2, "ports": map[string]any{"p1": map[string]any{"mtu": 1400}}}, 200)
	testenv.WaitFor(t, 25*time.Second, "the timer rolls back", func() bool {
		m := r.do(api.NetworkGet, nil, 200)
		return m["pending"] == nil && m["version"] == v2 && r.link("p1").Attrs().MTU == 9000
	})
	if !strings.Contains(r.file("10-routerd-p1.network"), "MTUBytes=9000") {
		t.Errorf("files not restored: %q", r.file("10-routerd-p1.network"))
	}
	if _, err := os.Stat(filepath.Join(r.state, "pending.json")); !os.IsNotExist(err) {
		t.Errorf("pending state left on disk: %v", err)
	}

	// Lock-out: the caller's local address, and an established SSH
	// session, are refused; nothing applied.
	p = r.do(api.NetworkPlanOp, map[string]any{"ports": map[string]any{"r0": map[string]any{"up": false}}, "local": "192.0.2.1"}, 200)
	if ref := toStrings(p["refused"]); len(ref) != 1 || !strings.HasPrefix(ref[0], "refused:") || !strings.Contains(ref[0], "local") {
		t.Errorf("plan refused: %v", p["refused"])
	}
	if g := toStrings(p["addresses_gone"]); len(g) != 2 {
		t.Errorf("addresses_gone: %v", g)
	}
	if m := r.do(api.NetworkApplyOp, map[string]any{"version": v2, "ports": map[string]any{"r0": map[string]any{"up": false}}, "local": "192.0.2.1"}, 400); !strings.Contains(m["error"].(string), "refused:") {
		t.Errorf("refused apply: %v", m)
	}
	stop := sshSession(t, ns, "192.0.2.1")
	p = r.do(api.NetworkPlanOp, map[string]any{"ports": map[string]any{"r0": map[string]any{"up": false}}}, 200)
	if ref := toStrings(p["refused"]); len(ref) != 1 || !strings.Contains(ref[0], "SSH session") {
		t.Errorf("SSH refusal: %v", p["refused"])
	}
	stop()
	if r.link("r0").Attrs().Flags&net.FlagUp == 0 {
		t.Fatal("a refused change reached the kernel")
	}

	// A restart during the window: rolled back at start.
	r.do(api.NetworkApplyOp, map[string]any{"version": v2, "ports": map[string]any{"p1": map[string]any{"mtu": 1280}}}, 200)
	r.run.stop()
	r.start(time.Minute)
	if m := r.do(api.NetworkGet, nil, 200); m["pending"] != nil || m["version"] != v2 || r.link("p1").Attrs().MTU != 9000 {
		t.Fatalf("after a restart: pending %v version %v (want %s) mtu %d", m["pending"], m["version"], v2, r.link("p1").Attrs().MTU)
	}
	want := []string{"network.adopted", "network.pending", "network.confirmed", "network.pending", "network.rolledback request",
		"network.pending", "network.rolledback timer", "network.pending", "network.rolledback restart"}
	testenv.WaitFor(t, 5*time.Second, "the events", func() bool {
		evMu.Lock()
		defer evMu.Unlock()
		return len(events) >= len(want)
	})
	evMu.Lock()
	if d := cmp.Diff(want, events); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	evMu.Unlock()
}

// sshSession opens an established TCP session to addr:22 inside ns (a
// stand-in for sshd: the guard reads the kernel's socket table).
func sshSession(t *testing.T, ns *netns.NS, addr string) func() {
	t.Helper()
	var ln net.Listener
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp", net.JoinHostPort(addr, "22")); err != nil {
			return err
		}
		c, err = net.Dial("tcp", net.JoinHostPort(addr, "22"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return func() { c.Close(); s.Close(); ln.Close() }
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestNetworkIPOperations: /network/ip-add, ip-check and ip-delete on a
// port of the host kernel, with the refusals of Document 1 (local, the
// default route's gateway, a DHCP-leased address) and of the clients'
// owner (a registered client's gateway, asked of a stand-in subscribers
// service; not running: nothing refused, and said in the log).
func TestNetworkIPOperations(t *testing.T) {
	ns := testenv.Netns(t)
	port(t, ns)
	veth(t, ns, "p1", "p1x")
	env := testenv.Start(t)
	r := &netRig{t: t, env: env, ns: ns, state: t.TempDir()}
	r.start(time.Minute)
	r.do(api.NetworkAdoptOp, map[string]any{}, 201)

	if m := r.do(api.NetIPAddOp, map[string]any{"iface": "p1", "ip": "198.51.100.1/24"}, 200); m["persisted"] != true {
		t.Fatalf("ip-add: %v", m)
	}
	if f := r.file("10-routerd-p1.network"); !strings.Contains(f, "Address=198.51.100.1/24") {
		t.Errorf("the files do not follow ip-add:\n%s", f)
	}
	if out := testenv.Run(t, ns, "ip", "addr", "show", "p1"); !strings.Contains(out, "198.51.100.1/24") {
		t.Fatalf("ip-add not in the kernel:\n%s", out)
	}
	c := r.do(api.NetIPCheckOp, map[string]any{"iface": "p1", "ip": "198.51.100.1/24", "local": "198.51.100.1"}, 200)
	if ref := toStrings(c["refused"]); len(ref) != 1 || !strings.Contains(ref[0], "local") || len(toStrings(c["impact"])) != 1 {
		t.Errorf("ip-check: %v", c)
	}
	r.do(api.NetIPDeleteOp, map[string]any{"iface": "p1", "ip": "198.51.100.1/24", "local": "198.51.100.1"}, 409)

	// The default route's gateway is reached through r0's address.
	testenv.Run(t, ns, "ip", "route", "add", "default", "via", "192.0.2.254")
	if m := r.do(api.NetIPDeleteOp, map[string]any{"iface": "r0", "ip": "192.0.2.1/24"}, 409); !strings.Contains(strings.Join(toStrings(m["refused"]), " "), "default route's gateway") {
		t.Errorf("default route refusal: %v", m)
	}
	// A leased address (finite lifetime) is not the operator's to remove.
	testenv.Run(t, ns, "ip", "addr", "add", "203.0.113.9/24", "dev", "p1", "valid_lft", "300", "preferred_lft", "300")
	if m := r.do(api.NetIPDeleteOp, map[string]any{"iface": "p1", "ip": "203.0.113.9/24"}, 409); !strings.Contains(strings.Join(toStrings(m["refused"]), " "), "leased by DHCP") {
		t.Errorf("leased refusal: %v", m)
	}
	doc := r.do(api.NetworkGet, nil, 200)
	var leased map[string]any
	for _, a := range doc["addresses"].([]any) {
		if a.(map[string]any)["cidr"] == "203.0.113.9/24" {
			leased = a.(map[string]any)
		}
	}
	if leased == nil || leased["dynamic"] != true || leased["source"] != "kernel" || leased["configured"] != false {
		t.Errorf("leased address record: %v", leased)
	}
	if u := toStrings(doc["uplinks"]); len(u) != 1 || u[0] != "r0" {
		t.Errorf("uplinks: %v", doc["uplinks"])
	}

	// A registered client's gateway, from the clients' owner.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "subscribers", Version: "0.0.0", Log: testenv.Log(t), Endpoints: []bus.Endpoint{
			bus.Bind(api.ClientsPage, func(_ context.Context, in *api.ClientPageRequest) (*api.ClientPage, error) {
				cs := []api.Client{}
				if in.Iface == "p1" {
					cs = append(cs, api.Client{MAC: "AA:BB:CC:DD:EE:01", IP: "198.51.100.50", Iface: "p1", Gateway: "198.51.100.1"})
				}
				return &api.ClientPage{Count: len(cs), Clients: cs}, nil
			}),
		}})
	}()
	testenv.WaitFor(t, 10*time.Second, "stand-in subscribers", func() bool {
		_, err := bus.Call(context.Background(), env.NC, api.ClientsPage.Subject(), &pb.Request{Method: "GET"})
		return err == nil
	})
	if m := r.do(api.NetIPDeleteOp, map[string]any{"iface": "p1", "ip": "198.51.100.1/24"}, 409); !strings.Contains(strings.Join(toStrings(m["refused"]), " "), "gateway of 1 registered client") {
		t.Errorf("client gateway refusal: %v", m)
	}
	// DELETE /ip too.
	if st, m := call(t, env, api.AddrDelete.Subject(), "DELETE", map[string]any{"iface": "p1", "ip": "198.51.100.1/24"}); st != 409 {
		t.Errorf("DELETE /ip of a client's gateway: %d %v", st, m)
	}
	cancel()
	<-done
	testenv.WaitFor(t, 10*time.Second, "stand-in gone", func() bool {
		_, err := bus.Call(context.Background(), env.NC, api.ClientsPage.Subject(), &pb.Request{Method: "GET"})
		return err != nil
	})
	r.do(api.NetIPDeleteOp, map[string]any{"iface": "p1", "ip": "198.51.100.1/24"}, 200)
	if out := testenv.Run(t, ns, "ip", "addr", "show", "p1"); strings.Contains(out, "198.51.100.1/24") {
		t.Errorf("ip-delete left the address:\n%s", out)
	}
	if f := r.file("10-routerd-p1.network"); strings.Contains(f, "Address=198.51.100.1/24") {
		t.Errorf("the files do not follow ip-delete:\n%s", f)
	}
	r.do(api.NetVLANCheckOp, map[string]any{"name": "vlan100"}, 404)
	r.do(api.NetVLANDeleteOp, map[string]any{"name": "vlan100"}, 404)
}

// TestNetworkTimerWithoutEtcd: etcd stops during the window; the timer
// still rolls the kernel and the files back at the deadline from the copy
// on disk, and once etcd is back the next start finishes the rollback in
// the store (the document's version as before, nothing pending).
func TestNetworkTimerWithoutEtcd(t *testing.T) {
	ns := testenv.Netns(t)
	veth(t, ns, "p1", "p1x")
	env := testenv.Start(t)
	dir, state := t.TempDir(), t.TempDir()
	ctx := context.Background()
	e1, err := store.StartEmbedded(ctx, store.EmbedConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	startOn := func(kv *clientv3.Client, confirm time.Duration) *running {
		svc, err := netcfg.New(netcfg.Deps{NC: env.NC, KV: kv, NS: ns, Log: testenv.Log(t), StateDir: state, Confirm: confirm})
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		run := &running{cancel: cancel, done: make(chan error, 1)}
		go func() { run.done <- svc.Run(cctx) }()
		t.Cleanup(run.stop)
		testenv.WaitFor(t, 20*time.Second, "netcfg serves", func() bool {
			_, err := bus.Call(ctx, env.NC, api.NetworkGet.Subject(), &pb.Request{Method: "GET"})
			return err == nil
		})
		return run
	}
	r := &netRig{t: t, env: env, ns: ns, state: state}
	first := startOn(e1.Client(), 5*time.Second)
	r.do(api.NetworkAdoptOp, map[string]any{}, 201)
	v1 := r.version()
	r.do(api.NetworkApplyOp, map[string]any{"version": v1, "ports": map[string]any{"p1": map[string]any{"mtu": 9000}}}, 200)
	if r.link("p1").Attrs().MTU != 9000 {
		t.Fatal("not applied")
	}
	applied := time.Now()
	e1.Close()
	testenv.WaitFor(t, 15*time.Second, "the timer rolls the kernel back without etcd", func() bool { return r.link("p1").Attrs().MTU == 1500 })
	if took := time.Since(applied); took > 14*time.Second {
		t.Errorf("rolled back %v after the apply with a 5 s window", took)
	}
	if f := r.file("10-routerd-p1.network"); strings.Contains(f, "MTUBytes=9000") {
		t.Errorf("files not rolled back:\n%s", f)
	}
	// The disk copy is marked after the kernel is put back (the MTU seen
	// above): wait for it too, bounded.
	testenv.WaitFor(t, 5*time.Second, "the disk copy marked rolled back locally", func() bool {
		raw, _ := os.ReadFile(filepath.Join(state, "pending.json"))
		return strings.Contains(string(raw), `"local_done": true`)
	})
	first.stop()

	e2, err := store.StartEmbedded(ctx, store.EmbedConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	startOn(e2.Client(), 5*time.Second)
	if m := r.do(api.NetworkGet, nil, 200); m["pending"] != nil || m["version"] != v1 {
		t.Fatalf("after etcd came back: pending %v version %v, want %s", m["pending"], m["version"], v1)
	}
	if _, err := os.Stat(filepath.Join(state, "pending.json")); !os.IsNotExist(err) {
		t.Errorf("disk copy left: %v", err)
	}
}

// TestNetworkStandbyTakesOverTheDeadline: a second netcfg standing by for
// the same host when the first, holding an apply waiting for confirm,
// stops: it takes the deadline over (the change stays until then, as it
// would have) and rolls it back when it passes.
func TestNetworkStandbyTakesOverTheDeadline(t *testing.T) {
	ns := testenv.Netns(t)
	veth(t, ns, "p1", "p1x")
	env := testenv.Start(t)
	state := t.TempDir()
	r := &netRig{t: t, env: env, ns: ns, state: state}
	r.start(8 * time.Second)
	first := r.run
	logs := &logBuf{}
	svc, err := netcfg.New(netcfg.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: slog.New(slog.NewTextHandler(logs, nil)), StateDir: state, Confirm: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	second := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { second.done <- svc.Run(ctx) }()
	t.Cleanup(second.stop)
	testenv.WaitFor(t, 10*time.Second, "the second stands by", func() bool { return strings.Contains(logs.String(), "standing by") })

	r.do(api.NetworkAdoptOp, map[string]any{}, 201)
	v1 := r.version()
	a := r.do(api.NetworkApplyOp, map[string]any{"version": v1, "ports": map[string]any{"p1": map[string]any{"mtu": 9000}}}, 200)
	deadline := time.Unix(int64(a["deadline"].(float64)), 0)
	first.stop()
	testenv.WaitFor(t, 20*time.Second, "the second serves", func() bool {
		_, err := bus.Call(context.Background(), env.NC, api.NetworkGet.Subject(), &pb.Request{Method: "GET"})
		return err == nil && strings.Contains(logs.String(), "took over a network apply")
	})
	if time.Now().Before(deadline) {
		if m := r.do(api.NetworkGet, nil, 200); m["pending"] == nil || r.link("p1").Attrs().MTU != 9000 {
			t.Errorf("before the deadline the change should still wait: pending %v mtu %d", m["pending"], r.link("p1").Attrs().MTU)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the second rolls back at the deadline", func() bool {
		m := r.do(api.NetworkGet, nil, 200)
		return m["pending"] == nil && m["version"] == v1 && r.link("p1").Attrs().MTU == 1500
	})
	if time.Now().Before(deadline) {
		t.Errorf("rolled back before the deadline")
	}
}
