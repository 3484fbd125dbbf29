package subscribers_test

import (
	"testing"

	"routerd.dev/shared/testenv"
)

// TestPinnedPrefix: a prefix of the reserved band pinned to a registered
// client through dhcp's POST /pd/assign is that client's prefix6_pinned in
// GET /clients6 (null for the others; counted in with_prefix) until DELETE
// /pd/assign; a client delete that fails half way puts the reservation
// back with its pin, and a delete that succeeds takes the pin away with it.
func TestPinnedPrefix(t *testing.T) {
	r := startRig(t)
	r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 20, "up_mbps": 10})
	if st, m := r.do(t, "POST", "/pd", map[string]any{"iface": r.iface}); st != 201 {
		t.Fatalf("POST /pd: %d %v", st, m)
	}
	const a, b = "02:00:00:00:08:01", "02:00:00:00:08:02"
	for _, c := range []map[string]any{{"mac": a, "ip": "10.50.0.81", "plan": "gold"}, {"mac": b, "ip": "10.50.0.82"}} {
		if st, m := r.do(t, "POST", "/clients", c); st != 201 {
			t.Fatalf("add: %d %v", st, m)
		}
	}
	if st, m := r.do(t, "POST", "/pd/assign", map[string]any{"mac": "02:00:00:00:08:99"}); st != 404 {
		t.Errorf("pin for no client: %d %v", st, m)
	}
	st, m := r.do(t, "POST", "/pd/assign", map[string]any{"mac": "02-00-00-00-08-01"})
	if st != 200 || m["prefix6"] != "2001:db8:a000::/56" {
		t.Fatalf("pin: %d %v", st, m)
	}
	for mac, ip := range map[string]string{a: "2001:db8:50::81", b: "2001:db8:50::82"} {
		testenv.Run(t, r.ns, "ip", "neigh", "replace", ip, "lladdr", mac, "dev", r.iface, "nud", "permanent")
	}
	pinned := func() (map[string]any, map[string]any) {
		t.Helper()
		st, m := r.do(t, "GET", "/clients6", nil)
		if st != 200 {
			t.Fatalf("clients6: %d %v", st, m)
		}
		out := map[string]any{}
		for _, e := range m["clients"].([]any) {
			e := e.(map[string]any)
			out[e["mac"].(string)] = e["prefix6_pinned"]
		}
		return out, m["summary"].(map[string]any)
	}
	got, sum := pinned()
	if got[a] != "2001:db8:a000::/56" || got[b] != nil || sum["with_prefix"] != float64(1) || len(got) != 2 {
		t.Errorf("clients6 prefix6_pinned %v, summary %v", got, sum)
	}

	// A delete the shaper refuses: 500, the client and its pin back.
	r.fx.mu.Lock()
	r.fx.refuse["shaper"] = true
	r.fx.mu.Unlock()
	st, m = r.do(t, "DELETE", "/clients/"+a, nil)
	r.fx.mu.Lock()
	r.fx.refuse["shaper"] = false
	r.fx.mu.Unlock()
	if st != 500 {
		t.Fatalf("delete refused by the shaper: %d %v", st, m)
	}
	if got, _ := pinned(); got[a] != "2001:db8:a000::/56" {
		t.Errorf("pin lost by a delete rolled back: %v", got)
	}
	if st, m := r.do(t, "GET", "/pd", nil); st != 200 || len(m["pinned"].([]any)) != 1 || field(m["pinned"].([]any)[0].(map[string]any), "mac") != a {
		t.Errorf("GET /pd after the rolled-back delete: %d %v", st, m["pinned"])
	}

	// Unpinned: null again.
	if st, m := r.do(t, "DELETE", "/pd/assign", map[string]any{"mac": a}); st != 200 {
		t.Fatalf("unpin: %d %v", st, m)
	}
	if got, sum := pinned(); got[a] != nil || sum["with_prefix"] != float64(0) {
		t.Errorf("after unpin: %v %v", got, sum)
	}
	// Pinned again, then the client deleted: the pin goes with it.
	if st, m := r.do(t, "POST", "/pd/assign", map[string]any{"mac": a, "prefix": "2001:db8:a000:300::"}); st != 200 || m["prefix6"] != "2001:db8:a000:300::/56" {
		t.Fatalf("pin a chosen prefix: %d %v", st, m)
	}
	if got, _ := pinned(); got[a] != "2001:db8:a000:300::/56" {
		t.Errorf("chosen pin: %v", got)
	}
	if st, m := r.do(t, "DELETE", "/clients/"+a, nil); st != 200 {
		t.Fatalf("delete: %d %v", st, m)
	}
	if _, m := r.do(t, "GET", "/pd", nil); len(m["pinned"].([]any)) != 0 {
		t.Errorf("pin left after the client's delete: %v", m["pinned"])
	}
}
