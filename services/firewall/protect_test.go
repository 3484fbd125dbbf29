package firewall_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/firewall"
	"routerd.dev/shared/testenv"
)

// The allow-list in the kernel: open while empty; with one entry, new
// connections from unlisted sources to the API and monitor ports are
// dropped while listed ones connect, established connections keep going,
// loopback and the router's own addresses always pass; it survives a
// restart; emptied, everyone connects again.
func TestAllowListInKernel(t *testing.T) {
	tp := newTopo(t)
	env := testenv.Start(t)
	apiPort := echo(t, tp.router, ":0")
	echo(t, tp.router, fmt.Sprintf(":%d", firewall.MonitorPort))
	other := echo(t, tp.router, ":0") // not a management port
	r := start(t, env, tp.router, firewall.Deps{APIPort: apiPort})
	apiAt := func(addr string) string { return fmt.Sprintf("%s:%d", addr, apiPort) }
	monAt := func(addr string) string { return fmt.Sprintf("%s:%d", addr, firewall.MonitorPort) }

	status, m := call(t, env, api.ProtectGet, "GET", nil)
	if status != 200 || m["status"] != firewall.StatusOpen || m["count"] != 0.0 || m["port"] != float64(apiPort) {
		t.Fatalf("GET /protect while empty: %d %v", status, m)
	}
	if err := dial(tp.up, apiAt(routerUp), 2*time.Second); err != nil {
		t.Fatalf("open list: the upstream cannot connect: %v", err)
	}
	held := dialConn(t, tp.up, apiAt(routerUp))

	status, m = call(t, env, api.ProtectAddOp, "POST", map[string]any{"network": "10.0.0.0/24", "comment": "subscribers' admin"})
	if status != 201 || len(m["networks"].([]any)) != 1 {
		t.Fatalf("POST /protect: %d %v", status, m)
	}
	if status, m = call(t, env, api.ProtectAddOp, "POST", map[string]any{"network": "10.0.0.0/24"}); status != 409 {
		t.Errorf("second add: %d %v", status, m)
	}
	for _, bad := range []string{"10.0.0.300", "2001:db8::/32", "10.0.0.0/33", "x"} {
		if status, m = call(t, env, api.ProtectAddOp, "POST", map[string]any{"network": bad}); status != 400 || m["field"] != "network" {
			t.Errorf("add %q: %d %v", bad, status, m)
		}
	}
	status, m = call(t, env, api.ProtectGet, "GET", nil)
	if m["status"] != firewall.StatusProtected || m["count"] != 1.0 {
		t.Errorf("GET /protect: %v", m)
	}

	if err := dial(tp.sub, apiAt(routerSub), 2*time.Second); err != nil {
		t.Errorf("a listed source cannot connect: %v", err)
	}
	if err := dial(tp.up, apiAt(routerUp), 500*time.Millisecond); err == nil {
		t.Error("an unlisted source connected to the API port")
	}
	if err := dial(tp.up, monAt(routerUp), 500*time.Millisecond); err == nil {
		t.Error("an unlisted source connected to the monitor port")
	}
	if err := dial(tp.up, fmt.Sprintf("%s:%d", routerUp, other), 2*time.Second); err != nil {
		t.Errorf("another port is guarded too: %v", err)
	}
	if err := roundTrip(held, 2*time.Second); err != nil {
		t.Errorf("an established connection was cut: %v", err)
	}
	for _, a := range []string{"127.0.0.1", routerUp, routerSub} {
		if err := dial(tp.router, apiAt(a), 2*time.Second); err != nil {
			t.Errorf("the router itself to %s: %v", a, err)
		}
	}
	out := nftList(t, tp.router)
	if !strings.Contains(out, `10.0.0.0/24 comment "subscribers' admin"`) {
		t.Errorf("allow4 lacks the entry:\n%s", out)
	}

	// The lock-out check of POST /network/protect-delete.
	if status, m = call(t, env, api.ProtectDeleteChecked, "POST", map[string]any{"network": "10.0.0.0/24", "client": subAddr}); status != 409 {
		t.Errorf("deleting the caller's only entry: %d %v", status, m)
	}
	call(t, env, api.ProtectAddOp, "POST", map[string]any{"network": "127.0.0.1"})
	if status, m = call(t, env, api.ProtectDeleteChecked, "POST", map[string]any{"network": "127.0.0.1", "client": upAddr}); status != 409 {
		t.Errorf("deleting 127.0.0.1: %d %v", status, m)
	}
	if status, m = call(t, env, api.ProtectDeleteOp, "DELETE", map[string]any{"network": "127.0.0.1"}); status != 200 {
		t.Errorf("DELETE 127.0.0.1: %d %v", status, m)
	}

	// A restart keeps it: the table stays while the service is down and is
	// written again from the store before the service answers.
	r.stop()
	if err := dial(tp.up, apiAt(routerUp), 500*time.Millisecond); err == nil {
		t.Error("unlisted source connected while the service was down")
	}
	testenv.Run(t, tp.router, "nft", "delete", "table", "inet", "routerd_firewall")
	r = start(t, env, tp.router, firewall.Deps{APIPort: apiPort})
	if err := dial(tp.up, apiAt(routerUp), 500*time.Millisecond); err == nil {
		t.Error("unlisted source connected after a restart")
	}

	if status, m = call(t, env, api.ProtectDeleteOp, "DELETE", map[string]any{"network": "10.0.0.0/24"}); status != 200 || len(m["networks"].([]any)) != 0 {
		t.Fatalf("DELETE /protect: %d %v", status, m)
	}
	if status, _ = call(t, env, api.ProtectDeleteOp, "DELETE", map[string]any{"network": "10.0.0.0/24"}); status != 404 {
		t.Errorf("second delete: %d", status)
	}
	if err := dial(tp.up, apiAt(routerUp), 2*time.Second); err != nil {
		t.Errorf("emptied list: the upstream cannot connect: %v", err)
	}
}
