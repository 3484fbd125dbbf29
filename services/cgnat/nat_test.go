package cgnat_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestNATPools drives GET/POST/DELETE /nat through the gateway.
func TestNATPools(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	r := newRig(t, ns)
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"iface": "up 0", "pool_start": "198.51.100.1"}, "iface"},
		{map[string]any{"pool_start": "198.51.100.1"}, "iface"},
		{map[string]any{"iface": "up0", "pool_start": "198.51.100.300"}, "pool_start"},
		{map[string]any{"iface": "up0", "pool_start": "198.51.100.9", "pool_end": "198.51.100.1"}, "pool_end"},
		{map[string]any{"iface": "up0", "pool_start": "198.51.100.1", "exempt": "10.0.0.0/99"}, "exempt"},
	} {
		if m := r.want(t, 400, "POST", "/nat", c.body); m["field"] != c.field {
			t.Errorf("%v: field %v, want %s", c.body, m["field"], c.field)
		}
	}
	r.want(t, 404, "POST", "/nat", map[string]any{"iface": "nosuch0", "pool_start": "198.51.100.1"})
	m := r.want(t, 201, "POST", "/nat", map[string]any{"iface": "up0", "pool_start": "198.51.100.1", "pool_end": "198.51.100.4",
		"exempt": "10.10.0.0/16, 192.168.0.0/16", "comment": "office"})
	p := m["pool"].(map[string]any)
	if p["pool_end"] != "198.51.100.4" || len(p["exempt"].([]any)) != 2 || p["comment"] != "office" || p["created"] == "" {
		t.Fatalf("pool: %v", m)
	}
	m = r.want(t, 200, "GET", "/nat", nil)
	live, _ := json.Marshal(m["live_postrouting"])
	if m["count"].(float64) != 1 || !strings.Contains(string(live), `oifname \"up0\" snat to 198.51.100.1-198.51.100.4`) ||
		!strings.Contains(string(live), `ip saddr 10.10.0.0/16 accept`) {
		t.Fatalf("GET /nat: %v", m)
	}
	// The action form lists the same.
	if m := r.want(t, 200, "GET", "/api"+q("action", "nat-list"), nil); m["count"].(float64) != 1 {
		t.Fatalf("nat-list: %v", m)
	}
	// A single address: pool_end is pool_start; replacing the pool.
	m = r.want(t, 201, "POST", "/nat", map[string]any{"iface": "up0", "pool_start": "198.51.100.7"})
	if m["message"] != "NAT pool replaced" || m["pool"].(map[string]any)["pool_end"] != "198.51.100.7" {
		t.Fatalf("replace: %v", m)
	}
	out := testenv.Run(t, ns, "nft", "list", "chain", "ip", "routerd_cgnat", "postrouting")
	if strings.Contains(out, "198.51.100.4") || !strings.Contains(out, "snat to 198.51.100.7") {
		t.Fatalf("after replace:\n%s", out)
	}
	// The pool is what a VLAN delete would remove.
	use, err := bus.Invoke(context.Background(), r.env.NC, api.CGNATUses, &api.NATIface{Iface: "up0"})
	if err != nil || use.CGNAT || use.Pool == nil || *use.Pool != "198.51.100.7-198.51.100.7" {
		t.Fatalf("uses: %+v %v", use, err)
	}
	r.want(t, 400, "DELETE", "/nat", map[string]any{})
	m = r.want(t, 200, "DELETE", "/nat", map[string]any{"iface": "up0"})
	if m["iface"] != "up0" || m["rules_removed"].(float64) != 1 || m["pool"].(map[string]any)["pool_start"] != "198.51.100.7" {
		t.Fatalf("delete: %v", m)
	}
	r.want(t, 404, "DELETE", "/nat", map[string]any{"iface": "up0"})
	if out := testenv.Run(t, ns, "nft", "list", "chain", "ip", "routerd_cgnat", "postrouting"); strings.Contains(out, "snat") {
		t.Fatalf("after delete:\n%s", out)
	}
}

// TestForwards drives GET/POST/DELETE /pf and /portforward.
func TestForwards(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	link(t, ns, "sub0", "sub0p", "10.77.0.1/24")
	r := newRig(t, ns)
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"proto": "sctp", "public_port": 80, "client_ip": "10.77.0.5", "client_port": 80}, "proto"},
		{map[string]any{"public_ip": "x", "public_port": 80, "client_ip": "10.77.0.5", "client_port": 80}, "public_ip"},
		{map[string]any{"public_port": 0, "client_ip": "10.77.0.5", "client_port": 80}, "public_port"},
		{map[string]any{"public_port": 65536, "client_ip": "10.77.0.5", "client_port": 80}, "public_port"},
		{map[string]any{"public_port": 80, "client_ip": "10.77.0", "client_port": 80}, "client_ip"},
		{map[string]any{"public_port": 80, "client_ip": "10.77.0.5"}, "client_port"},
		{map[string]any{"public_port": 80, "client_ip": "224.0.0.5", "client_port": 80}, "client_ip"},
		{map[string]any{"public_port": 80, "client_ip": "0.0.0.0", "client_port": 80}, "client_ip"},
		{map[string]any{"public_ip": "127.0.0.1", "public_port": 80, "client_ip": "10.77.0.5", "client_port": 80}, "public_ip"},
	} {
		if m := r.want(t, 400, "POST", "/pf", c.body); m["field"] != c.field {
			t.Errorf("%v: field %v, want %s", c.body, m["field"], c.field)
		}
	}
	m := r.want(t, 201, "POST", "/pf", map[string]any{"public_port": 8080, "client_ip": "10.77.0.5", "client_port": 80, "comment": "cam"})
	f := m["forward"].(map[string]any)
	if f["proto"] != "tcp" || f["public_ip"] != "" || f["applied"] != true {
		t.Fatalf("add: %v", m)
	}
	r.want(t, 409, "POST", "/portforward", map[string]any{"public_port": 8080, "client_ip": "10.77.0.6", "client_port": 81})
	r.want(t, 201, "POST", "/portforward", map[string]any{"proto": "udp", "public_port": 8080, "client_ip": "10.77.0.6", "client_port": 81})
	r.want(t, 201, "GET", "/api"+q("action", "pf-add", "public_ip", "198.18.0.2", "public_port", "8080", "client_ip", "10.77.0.7", "client_port", "82"), nil)
	a := r.want(t, 200, "GET", "/pf", nil)
	b := r.want(t, 200, "GET", "/portforward", nil)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) || a["count"].(float64) != 3 {
		t.Fatalf("/pf and /portforward differ or miss:\n%s\n%s", ja, jb)
	}
	live, _ := json.Marshal(a["live"])
	for _, want := range []string{`fib daddr type local tcp dport 8080 dnat to 10.77.0.5:80`, `udp dport 8080 dnat to 10.77.0.6:81`, `ip daddr 198.18.0.2 tcp dport 8080 dnat to 10.77.0.7:82`} {
		if !strings.Contains(string(live), want) {
			t.Errorf("live lacks %q: %s", want, live)
		}
	}
	if out := testenv.Run(t, ns, "nft", "list", "chain", "ip", "routerd_cgnat", "forward"); !strings.Contains(out, "ip daddr 10.77.0.5 tcp dport 80 ct status dnat accept") {
		t.Fatalf("forward accept:\n%s", out)
	}
	// Forwards to clients behind sub0 are what its delete would remove.
	use, err := bus.Invoke(context.Background(), r.env.NC, api.CGNATUses, &api.NATIface{Iface: "sub0"})
	if err != nil || len(use.Forwards) != 3 || use.CGNAT {
		t.Fatalf("uses: %+v %v", use, err)
	}
	r.want(t, 404, "DELETE", "/pf", map[string]any{"public_port": 9999})
	r.want(t, 404, "DELETE", "/pf", map[string]any{"proto": "udp", "public_ip": "198.18.0.2", "public_port": 8080})
	r.want(t, 200, "DELETE", "/pf", map[string]any{"public_port": 8080})
	if m := r.want(t, 200, "GET", "/pf", nil); m["count"].(float64) != 2 {
		t.Fatalf("after delete: %v", m)
	}
	// Restart on a kernel without the table: rebuilt from the store.
	r.stop()
	testenv.Run(t, ns, "nft", "delete", "table", "ip", "routerd_cgnat")
	r.start(t)
	if out := testenv.Run(t, ns, "nft", "list", "chain", "ip", "routerd_cgnat", "prerouting"); !strings.Contains(out, "dnat to 10.77.0.6:81") || !strings.Contains(out, "dnat to 10.77.0.7:82") {
		t.Fatalf("after restart:\n%s", out)
	}
	// The VLAN's removal takes its forwards.
	rm, err := bus.Invoke(context.Background(), r.env.NC, api.CGNATIfaceRemove, &api.NATIface{Iface: "sub0"})
	if err != nil || len(rm.RemovedForwards) != 2 || rm.RemovedNAT {
		t.Fatalf("iface remove: %+v %v", rm, err)
	}
	if m := r.want(t, 200, "GET", "/pf", nil); m["count"].(float64) != 0 {
		t.Fatalf("after iface remove: %v", m)
	}
}
