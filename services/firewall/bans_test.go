package firewall_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	"routerd.dev/services/firewall"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// serveGateway runs the real gateway on a free port of the router
// namespace and returns the port.
func serveGateway(t *testing.T, env *testenv.Env, ns *netns.NS, key string) int {
	t.Helper()
	gw, err := gateway.New(gateway.Config{APIKey: key, NC: env.NC, Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	if err := ns.Do(func() (err error) { l, err = net.Listen("tcp", ":0"); return }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().(*net.TCPAddr).Port
}

// get sends GET path with key over a connection made in ns and returns
// the status code.
func get(t *testing.T, ns *netns.NS, addr, path, key string) (int, error) {
	t.Helper()
	var c net.Conn
	if err := ns.Do(func() (err error) { c, err = net.DialTimeout("tcp", addr, time.Second); return }); err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: router\r\nX-API-Key: %s\r\nConnection: close\r\n\r\n", path, key)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	var code int
	fmt.Sscanf(line, "HTTP/1.1 %d", &code)
	return code, nil
}

func banned(t *testing.T, env *testenv.Env) []string {
	t.Helper()
	st, err := invoke(t, env, api.Fail2banGet, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || len(st.Jails) != 1 {
		t.Fatalf("fail2ban status = %+v", st)
	}
	return st.Jails[0].BannedIPs
}

// A burst of wrong keys through the real gateway bans the source in the
// kernel (its next connection to the API port is dropped) while others
// still connect; loopback and allow-listed sources are never banned; a
// restart keeps the ban with the time it has left; unban lets the source
// back, and its next ban lasts twice as long.
func TestBanFromGatewayFailures(t *testing.T) {
	tp := newTopo(t)
	env := testenv.Start(t)
	const key = "right-key-0123456789"
	port := serveGateway(t, env, tp.router, key)
	cfg := firewall.BanConfig{MaxRetry: 3, FindTime: time.Minute, BanTime: time.Hour}
	r := start(t, env, tp.router, firewall.Deps{APIPort: port, Bans: cfg})
	at := func(a string) string { return fmt.Sprintf("%s:%d", a, port) }

	// Loopback and an allow-listed network fail as often as they like.
	if st, m := call(t, env, api.ProtectAddOp, "POST", map[string]any{"network": "10.0.0.0/24"}); st != 201 {
		t.Fatal(m)
	}
	for i := 0; i < 5; i++ {
		if code, err := get(t, tp.router, at("127.0.0.1"), "/status", "wrong"); err != nil || code != 401 {
			t.Fatalf("loopback wrong key: %d %v", code, err)
		}
		if code, err := get(t, tp.sub, at(routerSub), "/status", "wrong"); err != nil || code != 401 {
			t.Fatalf("allow-listed wrong key: %d %v", code, err)
		}
	}
	// The allow-list would keep the upstream out: empty it again.
	call(t, env, api.ProtectDeleteOp, "DELETE", map[string]any{"network": "10.0.0.0/24"})

	// The burst from the upstream namespace. The reports travel in the
	// background, so wait for the ban rather than for the answers.
	for i := 0; i < 3; i++ {
		if code, err := get(t, tp.up, at(routerUp), "/status?api_key=guess", "wrong"); err != nil || code != 401 {
			t.Fatalf("upstream wrong key %d: %d %v", i, code, err)
		}
	}
	testenv.WaitFor(t, 5*time.Second, "the upstream banned", func() bool { return slices.Contains(banned(t, env), upAddr) })
	if got := banned(t, env); len(got) != 1 {
		t.Errorf("banned = %v, want only %s (loopback and allow-listed never)", got, upAddr)
	}
	if err := dial(tp.up, at(routerUp), 500*time.Millisecond); err == nil {
		t.Error("the banned source connected to the API port")
	}
	if code, err := get(t, tp.sub, at(routerSub), "/protect", key); err != nil || code != 200 {
		t.Errorf("another source with the right key: %d %v", code, err)
	}
	out := nftList(t, tp.router)
	if !regexp.MustCompile(regexp.QuoteMeta(upAddr) + ` timeout (1h|59m\d+s) expires \S+ comment "routerd-api"`).MatchString(out) {
		t.Errorf("ban4 lacks the ban:\n%s", out)
	}

	// A restart puts it back with the time it has left.
	r.stop()
	testenv.Run(t, tp.router, "nft", "delete", "table", "inet", "routerd_firewall")
	r = start(t, env, tp.router, firewall.Deps{APIPort: port, Bans: cfg})
	out = nftList(t, tp.router)
	if !regexp.MustCompile(regexp.QuoteMeta(upAddr) + ` timeout 59m\d+s expires`).MatchString(out) {
		t.Errorf("after a restart ban4 lacks the ban with its time left:\n%s", out)
	}
	if err := dial(tp.up, at(routerUp), 500*time.Millisecond); err == nil {
		t.Error("the banned source connected after a restart")
	}

	// Unban: 400 for a bad address, 200 lifting it, 200 saying not banned.
	if st, m := call(t, env, api.Fail2banUnbanOp, "POST", map[string]any{"unban": "nonsense"}); st != 400 || m["field"] != "unban" {
		t.Errorf("unban nonsense: %d %v", st, m)
	}
	if st, m := call(t, env, api.Fail2banUnbanOp, "POST", map[string]any{"unban": upAddr}); st != 200 || m["detail"] == "" {
		t.Fatalf("unban: %d %v", st, m)
	}
	if err := dial(tp.up, at(routerUp), 2*time.Second); err != nil {
		t.Errorf("unbanned source cannot connect: %v", err)
	}
	if st, m := call(t, env, api.Fail2banUnbanOp, "POST", map[string]any{"unban": upAddr}); st != 200 || !strings.Contains(m["message"].(string), "not banned") {
		t.Errorf("second unban: %d %v", st, m)
	}

	// A repeat offender's ban doubles.
	for i := 0; i < 3; i++ {
		if _, err := invoke(t, env, api.FirewallAuthFailed, &api.AuthFailure{Addr: upAddr, Port: port}); err != nil {
			t.Fatal(err)
		}
	}
	if !regexp.MustCompile(regexp.QuoteMeta(upAddr) + ` timeout (2h|1h59m\d+s) expires`).MatchString(nftList(t, tp.router)) {
		t.Errorf("second ban is not 2h:\n%s", nftList(t, tp.router))
	}
	st, _ := invoke(t, env, api.Fail2banGet, &api.None{})
	if st.Jails[0].TotalBanned != 2 || st.Jails[0].CurrentlyBanned != 1 {
		t.Errorf("jail = %+v", st.Jails[0])
	}
	// IPv6 sources are banned in ban6.
	for i := 0; i < 3; i++ {
		invoke(t, env, api.FirewallAuthFailed, &api.AuthFailure{Addr: upAddr6})
	}
	if !strings.Contains(nftList(t, tp.router), upAddr6) {
		t.Error("IPv6 ban missing")
	}
	if err := dial(tp.up, fmt.Sprintf("[2001:db8:f::1]:%d", port), 500*time.Millisecond); err == nil {
		t.Error("the banned IPv6 source connected")
	}
}

// Off: GET /fail2ban says {running:false, jails:[]} and failures ban no one.
func TestBansOff(t *testing.T) {
	ns := testenv.Netns(t)
	env := testenv.Start(t)
	start(t, env, ns, firewall.Deps{Bans: firewall.BanConfig{Off: true}})
	st, m := call(t, env, api.Fail2banGet, "GET", nil)
	if st != 200 || m["running"] != false || len(m["jails"].([]any)) != 0 {
		t.Errorf("off: %d %v", st, m)
	}
	for i := 0; i < 10; i++ {
		invoke(t, env, api.FirewallAuthFailed, &api.AuthFailure{Addr: "192.0.2.77"})
	}
	if strings.Contains(nftList(t, ns), "192.0.2.77") {
		t.Error("banned while off")
	}
}
