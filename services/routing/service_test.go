package routing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
	"routerd.dev/services/routing"
	"routerd.dev/services/routing/bird"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func needBird(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bird"); err != nil {
		t.Skip("bird (package bird2) is not installed")
	}
}

// link joins router namespace r and uplink namespace u with a veth pair:
// up0 198.18.0.2/30 and 2001:db8:ffff::2/64 in r, eth0 198.18.0.1/30 and
// 2001:db8:ffff::1/64 in u.
func link(t testing.TB, r, u *netns.NS) {
	t.Helper()
	nl, err := r.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(u.FD())}
	if err := nl.LinkAdd(veth); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	ul, err := u.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	for _, side := range []struct {
		h    *netlink.Handle
		name string
		addr string
	}{{nl, "up0", "198.18.0.2/30"}, {ul, "eth0", "198.18.0.1/30"}} {
		l, err := side.h.LinkByName(side.name)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := netlink.ParseAddr(side.addr)
		if err := side.h.AddrAdd(l, a); err != nil {
			t.Fatal(err)
		}
		a6, _ := netlink.ParseAddr(map[string]string{"up0": "2001:db8:ffff::2/64", "eth0": "2001:db8:ffff::1/64"}[side.name])
		a6.Flags = 0x02 // IFA_F_NODAD: usable at once
		if err := side.h.AddrAdd(l, a6); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{side.name, "lo"} {
			l, _ := side.h.LinkByName(n)
			if err := side.h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// peerBird runs the upstream's BIRD in u: AS 65000, sends a default route
// and 8.8.8.0/24 (which a default-route peer must filter), accepts all.
func peerBird(t *testing.T, u *netns.NS) string {
	return peerBirdWith(t, u, peerConf)
}

const peerConf = `router id 198.18.0.1;
timeformat protocol iso long;
protocol device {}
protocol static st { ipv4; route 0.0.0.0/0 blackhole; route 8.8.8.0/24 blackhole; }
protocol bgp customer {
  local as 65000;
  neighbor 198.18.0.2 as 65010;
  direct;
  password "s3cret-md5";
  ipv4 { import all; export all; };
}
`

func peerBirdWith(t testing.TB, u *netns.NS, cfg string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "peer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "bird.conf")
	sock := filepath.Join(dir, "bird.ctl")
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net="+u.Path(), "bird", "-f", "-c", conf, "-s", sock, "-P", filepath.Join(dir, "pid"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testenv.Eventually(t, 10*time.Second, func() error {
		_, err := bird.Cmd(context.Background(), sock, "show status")
		if err != nil {
			return fmt.Errorf("%v (%s)", err, out.String())
		}
		return nil
	})
	return sock
}

type running struct {
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

func start(t testing.TB, env *testenv.Env, ns *netns.NS, dir string, confirm time.Duration) *running {
	t.Helper()
	svc, err := routing.New(routing.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: testenv.Log(t), Dir: dir, Confirm: confirm})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	t.Cleanup(r.stop)
	testenv.Eventually(t, 20*time.Second, func() error {
		select {
		case err := <-r.done:
			t.Fatalf("routing exited: %v", err)
		default:
		}
		st, m := callErr(env, api.BGPGet.Subject(), "GET", nil)
		if st != 200 {
			return fmt.Errorf("GET /bgp: %d %v", st, m)
		}
		if m["bird_error"] != nil {
			return fmt.Errorf("bird: %v", m["bird_error"])
		}
		return nil
	})
	// GET /bgp answers before the later endpoints are subscribed: wait for
	// the readiness endpoint, declared last.
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, routing.Name); missing != nil {
		t.Fatalf("not up: %v", missing)
	}
	return r
}

func callErr(env *testenv.Env, subject, method string, body any) (int, map[string]any) {
	raw, _ := json.Marshal(body)
	rep, err := bus.Call(context.Background(), env.NC, subject, &pb.Request{Method: method, Args: raw, Caller: "127.0.0.1", By: "tester"})
	if err != nil {
		return 0, map[string]any{"err": err.Error()}
	}
	var m map[string]any
	_ = json.Unmarshal(rep.Body, &m)
	return rep.Status, m
}

func call(t testing.TB, env *testenv.Env, op api.Operation, body any, want int) map[string]any {
	t.Helper()
	m := op.Describe()
	method := "POST"
	if m.Read {
		method = "GET"
	}
	st, out := callErr(env, m.Subject(), method, body)
	if st != want {
		t.Fatalf("%s %v: status %d, want %d: %v", m.Name, body, st, want, out)
	}
	return out
}

func peerOf(t testing.TB, v map[string]any, name string) map[string]any {
	t.Helper()
	for _, p := range v["peers"].([]any) {
		if p.(map[string]any)["name"] == name {
			return p.(map[string]any)
		}
	}
	t.Fatalf("no peer %s in %v", name, v["peers"])
	return nil
}

func birdShow(t testing.TB, sock, cmd string) string {
	t.Helper()
	out, err := birdShowErr(sock, cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return out
}

func birdShowErr(sock, cmd string) (string, error) {
	lines, err := bird.Cmd(context.Background(), sock, cmd)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text + "\n")
	}
	return b.String(), nil
}

// TestBGPWithRealPeer: the service's BIRD in the router namespace peers
// with an upstream's BIRD over a veth pair: the session comes up with the
// MD5 password, our prefix reaches the peer, the peer's default route is
// received and its other route filtered, a blackhole reaches the peer with
// 65535:666, the peer's community and NO_EXPORT and is dropped here, and
// the pending rules hold (pending=true, 409 meanwhile, confirm, undo).
func TestBGPWithRealPeer(t *testing.T) {
	needBird(t)
	t.Parallel()
	r, u := testenv.Netns(t), testenv.Netns(t)
	link(t, r, u)
	peerSock := peerBird(t, u)
	env := testenv.Start(t)
	dir := t.TempDir()
	start(t, env, r, dir, time.Minute)

	// BGP off: nothing waits.
	if a := call(t, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200); a["pending"] != false {
		t.Fatalf("set with BGP off: %v", a)
	}
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up-1", "ip": "198.18.0.1", "asn": 65000,
		"password": "s3cret-md5", "blackhole_community": "65000:666", "description": "transit A"}, 200)
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "185.10.0.0/22"}, 200)

	// Wrong input: 400 naming the field, nothing changed.
	for _, c := range []struct {
		op    api.Operation
		body  map[string]any
		field string
	}{
		{api.BGPAnnAddOp, map[string]any{"prefix": "10.0.0.0/8"}, "prefix"},
		{api.BGPAnnAddOp, map[string]any{"prefix": "185.10.0.0/25"}, "prefix"},
		{api.BGPAnnAddOp, map[string]any{"prefix": "2a0a::/12"}, "prefix"},
		{api.BGPAnnAddOp, map[string]any{"prefix": "185.10.0.1/22"}, "prefix"},
		{api.BGPPeerAddOp, map[string]any{"name": "bad name", "ip": "198.18.0.9", "asn": 1}, "name"},
		{api.BGPPeerAddOp, map[string]any{"name": "x", "ip": "nope", "asn": 1}, "ip"},
		{api.BGPPeerAddOp, map[string]any{"name": "x", "ip": "198.18.0.9"}, "asn"},
		{api.BGPPeerAddOp, map[string]any{"name": "x", "ip": "198.18.0.9", "asn": 1, "blackhole_community": "1:99999"}, "blackhole_community"},
		{api.BGPPeerAddOp, map[string]any{"name": "x", "ip": "198.18.0.9", "asn": 1, "description": strings.Repeat("d", 81)}, "description"},
		{api.BGPBhAddOp, map[string]any{"ip": "192.168.1.1"}, "ip"},
		{api.BGPSetOp, map[string]any{"router_id": "2001:db8::1"}, "router_id"},
	} {
		if a := call(t, env, c.op, c.body, 400); a["field"] != c.field {
			t.Errorf("%s %v: field %v, want %s (%v)", c.op.Describe().Name, c.body, a["field"], c.field, a)
		}
	}
	// A setting with problems: ibgp peer with another AS.
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "core", "ip": "198.18.0.5", "asn": 65099, "type": "ibgp"}, 400)
	call(t, env, api.BGPAnnDelOp, map[string]any{"prefix": "185.99.0.0/24"}, 404)
	call(t, env, api.BGPPeerDelOp, map[string]any{"name": "nobody"}, 404)
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "185.12.0.0/24"}, 200)
	call(t, env, api.BGPAnnDelOp, map[string]any{"prefix": "185.12.0.0/24"}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "spare", "ip": "198.18.0.9", "asn": 65009}, 200)
	call(t, env, api.BGPPeerDelOp, map[string]any{"name": "spare"}, 200)
	if v := call(t, env, api.BGPGet, nil, 200); len(v["peers"].([]any)) != 1 || len(v["announce"].([]any)) != 1 || v["peers"].([]any)[0].(map[string]any)["state"] != nil {
		t.Fatalf("with BGP off: peers %v announce %v", v["peers"], v["announce"])
	}
	if st, _ := callErr(env, api.BGPUnknownOp.Subject(), "POST", map[string]any{"op": "frobnicate"}); st != 404 {
		t.Errorf("unknown op: %d, want 404", st)
	}

	events, err := env.NC.SubscribeSync(event.Subject(routing.Name, ">"))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Unsubscribe()

	// Turning BGP on waits for confirm.
	a := call(t, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
	if a["pending"] != true || a["deadline"] == nil {
		t.Fatalf("enable: %v", a)
	}
	v := call(t, env, api.BGPGet, nil, 200)
	if p, _ := v["pending"].(map[string]any); p == nil || p["what"] != "set" || p["by"] != "tester@127.0.0.1" {
		t.Fatalf("pending: %v", v["pending"])
	}
	if a := call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "185.11.0.0/24"}, 409); !strings.Contains(a["error"].(string), "waiting for confirm") {
		t.Fatalf("409: %v", a)
	}
	call(t, env, api.BGPConfirmOp, nil, 200)
	call(t, env, api.BGPConfirmOp, nil, 409)

	// The session comes up: the peer's default received, 8.8.8.0/24 filtered.
	testenv.Eventually(t, 30*time.Second, func() error {
		v := call(t, env, api.BGPGet, nil, 200)
		p := peerOf(t, v, "up-1")
		if p["state"] != "Established" || p["up"] != true || p["received"].(float64) < 2 || p["filtered"].(float64) != 1 || p["sent"].(float64) < 1 {
			return fmt.Errorf("peer: %v", p)
		}
		return nil
	})
	// Events: the change, its confirm, the session going up.
	seen := map[string]bool{}
	for !seen[api.EventBGPChanged] || !seen[api.EventBGPConfirmed] || !seen["up"] {
		msg, err := events.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("events seen %v: %v", seen, err)
		}
		var ev event.Event
		_ = json.Unmarshal(msg.Data, &ev)
		seen[ev.Kind] = true
		if ev.Kind == api.EventBGPSession && strings.Contains(string(ev.Data), `"up":true`) && strings.Contains(string(ev.Data), `"peer":"up-1"`) {
			seen["up"] = true
		}
	}
	v = call(t, env, api.BGPGet, nil, 200)
	p := peerOf(t, v, "up-1")
	if p["password_set"] != true || p["since"] == nil || p["best"].(float64) != 1 || p["max_prefix"].(float64) != 16 {
		t.Errorf("peer: %v", p)
	}
	raw, _ := json.Marshal(v)
	if strings.Contains(string(raw), "s3cret") || strings.Contains(string(raw), "password\"") {
		t.Fatalf("GET /bgp shows the password: %s", raw)
	}
	// Stored sealed: etcd never holds the password in clear.
	if kv, err := env.KV.Get(context.Background(), "/router/routing/settings"); err != nil || len(kv.Kvs) != 1 ||
		strings.Contains(string(kv.Kvs[0].Value), "s3cret") || !strings.Contains(string(kv.Kvs[0].Value), `"password_sealed":"v1:`) {
		t.Fatalf("stored settings (%v): %s", err, kv.Kvs)
	}
	if out := birdShow(t, peerSock, "show route 185.10.0.0/22"); !strings.Contains(out, "185.10.0.0/22") {
		t.Fatalf("the peer lacks our prefix:\n%s", out)
	}
	nl, _ := r.Netlink()
	defer nl.Close()
	if rs, err := nl.RouteGet([]byte{1, 1, 1, 1}); err != nil || rs[0].Gw.String() != "198.18.0.1" {
		t.Fatalf("default route from BGP not in the kernel: %v %v", rs, err)
	}

	// config=1: rendered, password masked.
	c := call(t, env, api.BGPGet, map[string]any{"config": "1"}, 200)
	if cfg, _ := c["config"].(string); !strings.Contains(cfg, `password "********"`) || strings.Contains(cfg, "s3cret") || c["file"] == "" {
		t.Fatalf("config=1: %v", c)
	}

	// Blackhole: no timer, at the peer with the communities, dropped here.
	if a := call(t, env, api.BGPBhAddOp, map[string]any{"ip": "185.10.1.7"}, 200); a["pending"] != false {
		t.Fatalf("blackhole-add: %v", a)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		out, err := birdShowErr(peerSock, "show route 185.10.1.7/32 all")
		if err != nil {
			return err
		}
		for _, c := range []string{"(65000,666)", "(65535,666)", "(65535,65281)"} {
			if !strings.Contains(out, c) {
				return fmt.Errorf("blackhole at the peer lacks %s:\n%s", c, out)
			}
		}
		return nil
	})
	if rs, err := nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE); err == nil {
		found := false
		for _, rt := range rs {
			if rt.Dst != nil && rt.Dst.String() == "185.10.1.7/32" && rt.Type == 6 /* RTN_BLACKHOLE */ {
				found = true
			}
		}
		if !found {
			t.Errorf("no blackhole route for 185.10.1.7 in the router's kernel: %v", rs)
		}
	}

	// A change while one waits: 409; blackholes still pass; undo restores.
	if a := call(t, env, api.BGPPeerDisOp, map[string]any{"name": "up-1"}, 200); a["pending"] != true {
		t.Fatalf("peer-disable: %v", a)
	}
	call(t, env, api.BGPPeerEnOp, map[string]any{"name": "up-1"}, 409)
	call(t, env, api.BGPBhDelOp, map[string]any{"ip": "185.10.1.7"}, 200)
	testenv.Eventually(t, 10*time.Second, func() error {
		p := peerOf(t, call(t, env, api.BGPGet, nil, 200), "up-1")
		if p["up"] != false || p["enabled"] != false {
			return fmt.Errorf("disabled peer: %v", p)
		}
		return nil
	})
	call(t, env, api.BGPUndoOp, nil, 200)
	v = call(t, env, api.BGPGet, nil, 200)
	if v["pending"] != nil || len(v["blackhole"].([]any)) != 0 {
		t.Fatalf("after undo: pending %v blackhole %v", v["pending"], v["blackhole"])
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		p := peerOf(t, call(t, env, api.BGPGet, nil, 200), "up-1")
		if p["enabled"] != true || p["state"] != "Established" {
			return fmt.Errorf("peer after undo: %v", p)
		}
		return nil
	})

	// A backup upstream is depreferred both ways: our prefix reaches it
	// with our AS prepended twice more, its routes get local preference
	// 50 here. The password stays although not sent again.
	if a := call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up-1", "ip": "198.18.0.1", "asn": 65000, "role": "backup"}, 200); a["pending"] != true {
		t.Fatalf("peer change: %v", a)
	}
	call(t, env, api.BGPConfirmOp, nil, 200)
	ourSock := filepath.Join(dir, "bird.ctl")
	testenv.Eventually(t, 30*time.Second, func() error {
		out, err := birdShowErr(peerSock, "show route 185.10.0.0/22 all")
		if err != nil || !strings.Contains(out, "BGP.as_path: 65010 65010 65010") {
			return fmt.Errorf("at the peer (%v):\n%s", err, out)
		}
		out, err = birdShowErr(ourSock, "show route 0.0.0.0/0 all")
		if err != nil || !strings.Contains(out, "BGP.local_pref: 50") {
			return fmt.Errorf("here (%v):\n%s", err, out)
		}
		return nil
	})
	if p := peerOf(t, call(t, env, api.BGPGet, nil, 200), "up-1"); p["password_set"] != true || p["role"] != "backup" {
		t.Fatalf("peer: %v", p)
	}
}

// TestUnconfirmedChangeUndone: with a short confirm window, a change not
// confirmed is undone by the timer; one left pending across a restart is
// undone at start when its deadline passed, and waits out the rest
// otherwise.
func TestUnconfirmedChangeUndone(t *testing.T) {
	needBird(t)
	t.Parallel()
	ns := testenv.Netns(t)
	env := testenv.Start(t)
	dir := t.TempDir()
	const window = 1500 * time.Millisecond
	r := start(t, env, ns, dir, window)

	call(t, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up1", "ip": "198.18.0.1", "asn": 65000}, 200)
	call(t, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)

	announced := func() []any { return call(t, env, api.BGPGet, nil, 200)["announce"].([]any) }

	// 1. The timer undoes it.
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "185.10.0.0/22"}, 200)
	if len(announced()) != 1 {
		t.Fatal("not announced")
	}
	testenv.WaitFor(t, 10*time.Second, "the timer to undo the change", func() bool {
		v := call(t, env, api.BGPGet, nil, 200)
		return len(v["announce"].([]any)) == 0 && v["pending"] == nil
	})

	// 2. Stopped during the window, started after the deadline: undone
	// at start.
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "185.10.0.0/22"}, 200)
	r.stop()
	time.Sleep(window) // what is tested: the deadline passes while the service is down
	r = start(t, env, ns, dir, window)
	v := call(t, env, api.BGPGet, nil, 200)
	if len(v["announce"].([]any)) != 0 || v["pending"] != nil {
		t.Fatalf("after a restart past the deadline: announce %v pending %v", v["announce"], v["pending"])
	}

	// 3. Restarted within the window: still pending, undone at the
	// deadline. A longer window here, so that a slow restart on a busy
	// machine still comes back within it.
	const long = 6 * time.Second
	r.stop()
	r = start(t, env, ns, dir, long)
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "185.10.0.0/22"}, 200)
	r.stop()
	r = start(t, env, ns, dir, long)
	v = call(t, env, api.BGPGet, nil, 200)
	if len(v["announce"].([]any)) != 1 || v["pending"] == nil {
		t.Fatalf("after a restart within the window: announce %v pending %v", v["announce"], v["pending"])
	}
	testenv.WaitFor(t, 15*time.Second, "the re-armed timer to undo the change", func() bool {
		v := call(t, env, api.BGPGet, nil, 200)
		return len(v["announce"].([]any)) == 0 && v["pending"] == nil
	})
	// The daemon runs the restored configuration.
	c := call(t, env, api.BGPGet, map[string]any{"config": "1"}, 200)
	if strings.Contains(c["config"].(string), "185.10.0.0/22") {
		t.Fatalf("the undone prefix is still in the configuration:\n%s", c["config"])
	}
	if file, err := os.ReadFile(filepath.Join(dir, "bird.conf")); err != nil || strings.Contains(string(file), "185.10.0.0/22") {
		t.Fatalf("the undone prefix is still in bird.conf (%v):\n%s", err, file)
	}
	r.stop()
}

// TestOSPFAndBFD: OSPF reaches Full with a BIRD on the other side of the
// veth pair, and a BGP peer with bfd on shows its BFD session Up.
func TestOSPFAndBFD(t *testing.T) {
	needBird(t)
	t.Parallel()
	r, u := testenv.Netns(t), testenv.Netns(t)
	link(t, r, u)
	// The peer ends its OSPF wait timer after 2 s and declares itself DR,
	// which ends ours too (BackupSeen): Full in seconds, not 40.
	peerSock := peerBirdWith(t, u, `router id 198.18.0.1;
protocol device {}
protocol static st { ipv4; route 0.0.0.0/0 blackhole; }
protocol bfd { interface "eth0" { min rx interval 100 ms; min tx interval 100 ms; }; }
protocol bgp customer {
  local as 65000;
  neighbor 198.18.0.2 as 65010;
  direct;
  bfd on;
  ipv4 { import all; export all; };
}
protocol ospf v2 o {
  ipv4 { import all; export filter { if proto = "st" then accept; reject; }; };
  area 0 { interface "eth0" { cost 10; wait 2; priority 10; }; };
}
protocol ospf v3 o6 {
  ipv6 { import all; export none; };
  area 0 { interface "eth0" { cost 10; wait 2; priority 10; }; };
}
`)
	env := testenv.Start(t)
	dir := t.TempDir()
	start(t, env, r, dir, time.Minute)

	call(t, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up1", "ip": "198.18.0.1", "asn": 65000, "bfd": true}, 200)
	call(t, env, api.OSPFIfAddOp, map[string]any{"name": "up0", "cost": 20}, 200)
	call(t, env, api.OSPFIfAddOp, map[string]any{"name": "lo", "passive": true}, 200)
	if a := call(t, env, api.OSPFSetOp, map[string]any{"enabled": true, "area": "0"}, 200); a["pending"] != true {
		t.Fatalf("ospf-set: %v", a)
	}
	call(t, env, api.BGPConfirmOp, nil, 200)
	if a := call(t, env, api.BGPSetOp, map[string]any{"enabled": true}, 200); a["pending"] != true {
		t.Fatalf("set enabled: %v", a)
	}
	call(t, env, api.BGPConfirmOp, nil, 200)

	testenv.Eventually(t, 40*time.Second, func() error {
		v := call(t, env, api.BGPGet, nil, 200)
		o := v["ospf"].(map[string]any)
		ifs := o["interfaces"].([]any)
		if len(ifs) != 2 || ifs[0].(map[string]any)["neighbors_full"].(float64) != 1 {
			return fmt.Errorf("ospf interfaces: %v neighbours %v", ifs, o["neighbors"])
		}
		var n map[string]any
		for _, x := range o["neighbors"].([]any) {
			if x.(map[string]any)["proto"] == "ospf4" {
				n = x.(map[string]any)
			}
		}
		if n["router_id"] != "198.18.0.1" || n["iface"] != "up0" || n["ip"] != "198.18.0.1" {
			return fmt.Errorf("neighbour: %v", o["neighbors"])
		}
		ps := o["protocols"].([]any)
		if len(ps) != 2 || ps[0].(map[string]any)["state"] != "up" || ps[1].(map[string]any)["state"] != "up" {
			return fmt.Errorf("protocols: %v", ps)
		}
		p := peerOf(t, v, "up1")
		if p["state"] != "Established" || p["bfd_state"] != "Up" {
			return fmt.Errorf("peer: %v", p)
		}
		return nil
	})

	// OSPFv3 on the same interface: Full once our wait timer (40 s) ends
	// (the peer takes DR and names us BDR, so no BackupSeen shortens
	// it); the router counts once in neighbors_full.
	testenv.Eventually(t, 90*time.Second, func() error {
		o := call(t, env, api.BGPGet, nil, 200)["ospf"].(map[string]any)
		ns := o["neighbors"].([]any)
		if len(ns) != 2 {
			return fmt.Errorf("neighbours: %v", ns)
		}
		for _, x := range ns {
			n := x.(map[string]any)
			ok := n["router_id"] == "198.18.0.1" && n["iface"] == "up0" && strings.HasPrefix(n["state"].(string), "Full")
			switch n["proto"] {
			case "ospf4":
				ok = ok && n["ip"] == "198.18.0.1"
			case "ospf6":
				ok = ok && strings.HasPrefix(n["ip"].(string), "fe80:")
			default:
				ok = false
			}
			if !ok {
				return fmt.Errorf("neighbour: %v", n)
			}
		}
		if full := o["interfaces"].([]any)[0].(map[string]any)["neighbors_full"]; full != 1.0 {
			return fmt.Errorf("neighbors_full %v with one router Full over v2 and v3", full)
		}
		return nil
	})

	// originate_default: our best default (the peer's, over BGP) goes
	// into OSPF as an external LSA from our router id; the neighbour's
	// default over OSPF is refused while accept_default is off.
	ourSock := filepath.Join(dir, "bird.ctl")
	call(t, env, api.OSPFSetOp, map[string]any{"originate_default": true}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		out, err := birdShowErr(peerSock, "show ospf lsadb o")
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "0005" && f[1] == "0.0.0.0" && f[2] == "198.18.0.2" {
				return nil
			}
		}
		return fmt.Errorf("no external default LSA of ours at the neighbour (%v):\n%s", err, out)
	})
	// OSPFv3 too: our ::/0 (the static fallback) as an AS-external LSA.
	testenv.Eventually(t, 30*time.Second, func() error {
		out, err := birdShowErr(peerSock, "show ospf lsadb o6")
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "4005" && f[2] == "198.18.0.2" {
				return nil
			}
		}
		return fmt.Errorf("no OSPFv3 external LSA of ours at the neighbour (%v):\n%s", err, out)
	})
	if out, _ := birdShowErr(ourSock, "show route 0.0.0.0/0 protocol ospf4"); strings.Contains(out, "0.0.0.0/0") {
		t.Fatalf("default from OSPF taken with accept_default off:\n%s", out)
	}
	call(t, env, api.OSPFSetOp, map[string]any{"accept_default": true}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		out, err := birdShowErr(ourSock, "show route 0.0.0.0/0 protocol ospf4")
		if err != nil || !strings.Contains(out, "0.0.0.0/0") {
			return fmt.Errorf("no OSPF default here (%v):\n%s", err, out)
		}
		return nil
	})
}

// TestRPKI: with rpki on, BIRD validates origins against an RTR cache
// (stayrtr, in the router namespace, fed by a VRP file): a full-table
// upstream's route whose origin the VRPs contradict is dropped, one
// without a VRP is kept, and GET /bgp reports the data.
func TestRPKI(t *testing.T) {
	needBird(t)
	t.Parallel()
	if _, err := exec.LookPath("stayrtr"); err != nil {
		t.Skip("stayrtr (Debian package stayrtr) is not installed")
	}
	r, u := testenv.Netns(t), testenv.Netns(t)
	link(t, r, u)
	peerBirdWith(t, u, `router id 198.18.0.1;
protocol device {}
protocol static st { ipv4; route 8.8.8.0/24 blackhole; route 9.9.9.0/24 blackhole; }
protocol bgp customer {
  local as 65000;
  neighbor 198.18.0.2 as 65010;
  direct;
  ipv4 { import all; export all; };
}
`)
	// The VRP file: 8.8.8.0/24 may only come from AS15169.
	vrps := filepath.Join(t.TempDir(), "vrps.json")
	if err := os.WriteFile(vrps, []byte(`{"roas":[{"prefix":"8.8.8.0/24","maxLength":24,"asn":"AS15169","ta":"test"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rtr := exec.Command("nsenter", "--net="+r.Path(), "stayrtr", "-cache", vrps, "-bind", "127.0.0.1:8282",
		"-checktime=false", "-metrics.addr", "", "-refresh", "600")
	var rtrOut strings.Builder
	rtr.Stdout, rtr.Stderr = &rtrOut, &rtrOut
	if err := rtr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rtr.Process.Kill(); _ = rtr.Wait() })

	env := testenv.Start(t)
	dir := t.TempDir()
	start(t, env, r, dir, time.Minute)
	call(t, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2", "rpki": true}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "transit", "ip": "198.18.0.1", "asn": 65000, "routes": "full"}, 200)
	call(t, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)

	testenv.Eventually(t, 30*time.Second, func() error {
		v := call(t, env, api.BGPGet, nil, 200)
		st := v["rpki"].(map[string]any)["status"].(map[string]any)
		if st["vrps"].(float64) != 1 || st["data"] != "Established" || st["stale"] != false || st["age_s"] == nil {
			return fmt.Errorf("rpki status: %v (stayrtr: %s)", st, rtrOut.String())
		}
		p := peerOf(t, v, "transit")
		if p["state"] != "Established" || p["received"].(float64) != 2 || p["filtered"].(float64) != 1 || p["best"].(float64) != 1 {
			return fmt.Errorf("peer: %v", p)
		}
		return nil
	})
	if out := birdShow(t, filepath.Join(dir, "bird.ctl"), "show route 8.8.8.0/24 filtered"); !strings.Contains(out, "8.8.8.0/24") {
		t.Errorf("8.8.8.0/24 is not among the filtered routes:\n%s", out)
	}
	nl, _ := r.Netlink()
	defer nl.Close()
	if rs, err := nl.RouteGet([]byte{9, 9, 9, 9}); err != nil || rs[0].Gw.String() != "198.18.0.1" {
		t.Errorf("9.9.9.0/24 (no VRP) not installed: %v %v", rs, err)
	}
	if rs, err := nl.RouteGet([]byte{8, 8, 8, 8}); err == nil && rs[0].Gw != nil {
		t.Errorf("8.8.8.0/24 (RPKI invalid) installed: %v", rs)
	}
}

// TestNoDaemon: without BIRD, GET /bgp says so and changes are 409,
// nothing stored.
func TestNoDaemon(t *testing.T) {
	t.Parallel()
	ns, err := netns.Open("") // BIRD never runs: nothing touches the namespace
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	env := testenv.Start(t)
	svc, err := routing.New(routing.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: testenv.Log(t), Dir: t.TempDir(), BirdBin: "/nonexistent/bird"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, 20*time.Second, func() error {
		st, v := callErr(env, api.BGPGet.Subject(), "GET", nil)
		if st != 200 || v["installed"] != false || !strings.Contains(fmt.Sprint(v["bird_error"]), "not installed") {
			return fmt.Errorf("GET /bgp: %d %v", st, v)
		}
		return nil
	})
	// GET /bgp answers before the later endpoints are subscribed: wait for
	// the readiness endpoint, declared last.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, routing.Name); missing != nil {
		t.Fatalf("not up: %v", missing)
	}
	a := call(t, env, api.BGPSetOp, map[string]any{"asn": 65010}, 409)
	if !strings.Contains(a["error"].(string), "bird2") {
		t.Errorf("409: %v", a)
	}
	if kv, err := env.KV.Get(context.Background(), "/router/routing/settings"); err != nil || len(kv.Kvs) != 0 {
		t.Errorf("stored: %v %v", kv.Kvs, err)
	}
}

// TestIPv6Peer: an IPv6 session: the upstream's default ::/0 is received
// and its other route filtered, our IPv6 prefix reaches it.
func TestIPv6Peer(t *testing.T) {
	needBird(t)
	t.Parallel()
	r, u := testenv.Netns(t), testenv.Netns(t)
	link(t, r, u)
	peerSock := peerBirdWith(t, u, `router id 198.18.0.1;
protocol device {}
protocol static st6 { ipv6; route ::/0 blackhole; route 2a0b:4000::/32 blackhole; }
protocol bgp customer6 {
  local as 65000;
  neighbor 2001:db8:ffff::2 as 65010;
  direct;
  ipv6 { import all; export all; };
}
`)
	env := testenv.Start(t)
	start(t, env, r, t.TempDir(), time.Minute)
	call(t, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up6", "ip": "2001:db8:ffff::1", "asn": 65000}, 200)
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "2a0a:1000::/32"}, 200)
	call(t, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		p := peerOf(t, call(t, env, api.BGPGet, nil, 200), "up6")
		if p["state"] != "Established" || p["received"].(float64) != 2 || p["filtered"].(float64) != 1 || p["sent"].(float64) != 1 {
			return fmt.Errorf("peer: %v", p)
		}
		out, err := birdShowErr(peerSock, "show route 2a0a:1000::/32")
		if err != nil || !strings.Contains(out, "2a0a:1000::/32") {
			return fmt.Errorf("at the peer (%v): %s", err, out)
		}
		return nil
	})
}

// TestStoredSettingsRefused: settings that no longer load at start (here
// a password sealed under a key this host no longer has) leave BIRD
// running empty and GET /bgp saying why; a change that loads clears it.
func TestStoredSettingsRefused(t *testing.T) {
	needBird(t)
	t.Parallel()
	ns := testenv.Netns(t)
	env := testenv.Start(t)
	dir := t.TempDir()
	r := start(t, env, ns, dir, time.Minute)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up1", "ip": "198.18.0.1", "asn": 65000, "password": "pw"}, 200)
	r.stop()
	if err := os.Remove(filepath.Join(dir, "seal.key")); err != nil {
		t.Fatal(err)
	}
	svc, err := routing.New(routing.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: testenv.Log(t), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, 20*time.Second, func() error {
		st, v := callErr(env, api.BGPGet.Subject(), "GET", nil)
		if st != 200 || !strings.Contains(fmt.Sprint(v["bird_error"]), "does not open") {
			return fmt.Errorf("GET /bgp: %d %v", st, v["bird_error"])
		}
		return nil
	})
	// The operator sends the password again: it loads, the error goes.
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up1", "ip": "198.18.0.1", "asn": 65000, "password": "pw"}, 200)
	if v := call(t, env, api.BGPGet, nil, 200); v["bird_error"] != nil {
		t.Fatalf("bird_error after the change: %v", v["bird_error"])
	}
}
