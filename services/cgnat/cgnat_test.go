package cgnat_test

import (
	"context"
	"time"

	"fmt"
	"github.com/nats-io/nats.go"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/shared/testenv"
)

func client(mac, ip, host string) api.Client {
	return api.Client{MAC: mac, IP: ip, Hostname: host, Iface: "sub0"}
}

// TestCGNATEndpoints drives GET/POST /cgnat and GET /cgnat/lookup through
// the gateway, with subscribers given by the domain method, and checks the
// kernel's map, the audit log and the restart.
func TestCGNATEndpoints(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	link(t, ns, "sub0", "sub0p", "10.77.0.1/24")
	r := newRig(t, ns)

	m := r.want(t, 200, "GET", "/cgnat", nil)
	if m["enabled"] != false || m["port_range"] != "1024-65535" || m["block_size"].(float64) != 2048 ||
		m["capacity"].(float64) != 0 || m["audit_log"] != r.audit || m["subs_per_ip"].(float64) != 31 {
		t.Fatalf("defaults: %v", m)
	}
	// The three 400s of the spec, and nothing changes.
	for _, c := range []struct {
		body  map[string]any
		field string
		msg   string
	}{
		{map[string]any{"enabled": true}, "iface", "enabling needs a valid WAN interface"},
		{map[string]any{"enabled": "yes", "iface": "nosuch0", "pool": "203.0.113.1"}, "iface", "enabling needs a valid WAN interface"},
		{map[string]any{"enabled": "on", "iface": "up0"}, "pool", "enabling needs a non-empty public IP pool"},
		{map[string]any{"exempt": "10.0.0.0/33"}, "exempt", "invalid exempt network"},
		{map[string]any{"exempt": []string{"10.0.0.0/8", "x"}}, "exempt", "invalid exempt network"},
		{map[string]any{"enabled": "maybe"}, "enabled", "boolean"},
		{map[string]any{"pool": "203.0.113.9-203.0.113.1"}, "pool", "reversed"},
		{map[string]any{"port_min": 70000}, "port_min", ""},
		{map[string]any{"block_size": 70000}, "block_size", ""},
		{map[string]any{"port_min": 5000, "port_max": 4000}, "port_min", ""},
	} {
		m := r.want(t, 400, "POST", "/cgnat", c.body)
		if m["field"] != c.field || !strings.Contains(fmt.Sprint(m["error"], m["message"]), c.msg) {
			t.Errorf("%v: %v, want field %s and %q", c.body, m, c.field, c.msg)
		}
	}
	if m := r.want(t, 200, "GET", "/cgnat", nil); m["enabled"] != false || m["pool"] != "" {
		t.Fatalf("a refused change changed something: %v", m)
	}

	// Subscribers before CGNAT is configured wait (no pool, no capacity).
	ctx := context.Background()
	for _, c := range []api.Client{
		client("aa:00:00:00:00:01", "10.77.0.50", "alpha"),
		client("AA:00:00:00:00:02", "10.77.0.51", "beta"),
		client("AA:00:00:00:00:03", "10.99.0.7", "exempt-one"),
	} {
		if err := r.svc.UpsertClient(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// Enable with every spelling: the pool as an array, exempt as a string.
	m = r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": "1", "iface": "up0",
		"pool": []string{"203.0.113.1", "203.0.113.2"}, "exempt": "10.99.0.0/16"})
	st := m["status"].(map[string]any)
	if m["message"] != "CGNAT enabled" || st["pool"] != "203.0.113.1-203.0.113.2" || st["pool_ips"].(float64) != 2 ||
		st["capacity"].(float64) != 62 || st["assigned"].(float64) != 2 || st["free"].(float64) != 60 {
		t.Fatalf("enable: %v", m)
	}
	sample := st["sample"].([]any)
	if len(sample) != 2 || sample[0].(map[string]any)["public"] != "203.0.113.1:1024-3071" ||
		sample[1].(map[string]any)["public"] != "203.0.113.2:1024-3071" || sample[1].(map[string]any)["mac"] != "AA:00:00:00:00:02" {
		t.Fatalf("sample: %v", sample)
	}
	// One element per subscriber in the kernel; the exempt one has none.
	out := testenv.Run(t, ns, "nft", "list", "map", "ip", "routerd_cgnat", "cg_subs")
	if !has(out, "10.77.0.50 : 203.0.113.1 . 1024", "10.77.0.51 : 203.0.113.2 . 1024") || strings.Contains(out, "10.99.0.7") {
		t.Fatalf("map:\n%s", out)
	}
	if out := testenv.Run(t, ns, "nft", "list", "set", "ip", "routerd_cgnat", "cg_exempt"); !strings.Contains(out, "10.99.0.0/16") {
		t.Fatalf("exempt set:\n%s", out)
	}

	// Lookup: the formula's inverse.
	m = r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.2", "port", "3071"), nil)
	if m["found"] != true || m["mac"] != "AA:00:00:00:00:02" || m["private_ip"] != "10.77.0.51" || m["hostname"] != "beta" ||
		m["port_start"].(float64) != 1024 || m["port_end"].(float64) != 3071 || m["slot"].(float64) != 1 || m["ok"] != true {
		t.Fatalf("lookup: %v", m)
	}
	m = r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.1", "port", "3072"), nil)
	if m["found"] != false || m["public_ip"] != "203.0.113.1" || m["port"].(float64) != 3072 {
		t.Fatalf("lookup of a free slot: %v", m)
	}
	if m := r.want(t, 400, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113"), nil); m["field"] != "public_ip" {
		t.Fatalf("bad public_ip: %v", m)
	}
	r.want(t, 400, "GET", "/cgnat/lookup", nil)
	// The action form.
	if m := r.want(t, 200, "GET", "/api"+q("action", "cgnat-lookup", "public_ip", "203.0.113.1", "port", "2000"), nil); m["mac"] != "AA:00:00:00:00:01" {
		t.Fatalf("action lookup: %v", m)
	}

	// Adding a subscriber never moves the others; a release frees the slot
	// for the next one.
	if err := r.svc.UpsertClient(ctx, client("AA:00:00:00:00:04", "10.77.0.52", "gamma")); err != nil {
		t.Fatal(err)
	}
	if m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.1", "port", "3072"), nil); m["mac"] != "AA:00:00:00:00:04" || m["slot"].(float64) != 2 {
		t.Fatalf("third subscriber: %v", m)
	}
	if err := r.svc.RemoveClient(ctx, "aa:00:00:00:00:01"); err != nil {
		t.Fatal(err)
	}
	if m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.1", "port", "1024"), nil); m["found"] != false {
		t.Fatalf("released slot still found: %v", m)
	}
	if out := testenv.Run(t, ns, "nft", "list", "map", "ip", "routerd_cgnat", "cg_subs"); strings.Contains(out, "10.77.0.50 ") {
		t.Fatalf("released element still in the map:\n%s", out)
	}
	if err := r.svc.UpsertClient(ctx, client("AA:00:00:00:00:05", "10.77.0.53", "delta")); err != nil {
		t.Fatal(err)
	}
	if m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.1", "port", "1024"), nil); m["mac"] != "AA:00:00:00:00:05" {
		t.Fatalf("freed slot not given to the next subscriber: %v", m)
	}
	// A changed address keeps the slot.
	if err := r.svc.UpsertClient(ctx, client("AA:00:00:00:00:02", "10.77.0.61", "beta")); err != nil {
		t.Fatal(err)
	}
	if m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.2", "port", "1024"), nil); m["private_ip"] != "10.77.0.61" || m["slot"].(float64) != 1 {
		t.Fatalf("changed address: %v", m)
	}

	// The exempt network emptied: its client gets a slot; set again: released.
	if m := r.want(t, 200, "POST", "/cgnat", map[string]any{"exempt": []string{}}); m["status"].(map[string]any)["assigned"].(float64) != 4 {
		t.Fatalf("exempt emptied: %v", m)
	}
	if out := testenv.Run(t, ns, "nft", "list", "map", "ip", "routerd_cgnat", "cg_subs"); !strings.Contains(out, "10.99.0.7 : ") {
		t.Fatalf("the formerly exempt client is not mapped:\n%s", out)
	}
	if m := r.want(t, 200, "POST", "/cgnat", map[string]any{"exempt": "10.99.0.0/16"}); m["status"].(map[string]any)["assigned"].(float64) != 3 {
		t.Fatalf("exempt again: %v", m)
	}
	// The audit log has every assignment and release.
	a := r.auditText(t)
	for _, want := range []string{
		"assign mac=AA:00:00:00:00:01 private=10.77.0.50 public=203.0.113.1 ports=1024-3071 slot=0",
		"release mac=AA:00:00:00:00:01 private=10.77.0.50 public=203.0.113.1 ports=1024-3071 slot=0",
		"assign mac=AA:00:00:00:00:05 private=10.77.0.53 public=203.0.113.1 ports=1024-3071 slot=0",
		"release mac=AA:00:00:00:00:02 private=10.77.0.51",
		"assign mac=AA:00:00:00:00:02 private=10.77.0.61 public=203.0.113.2 ports=1024-3071 slot=1",
	} {
		if !strings.Contains(a, want) {
			t.Errorf("audit log lacks %q:\n%s", want, a)
		}
	}

	// Restart on a kernel that lost an element and holds a stranger: both
	// ways back to the store, the same slots.
	r.stop()
	testenv.Run(t, ns, "nft", "delete", "element", "ip", "routerd_cgnat", "cg_subs", "{ 10.77.0.61 }")
	testenv.Run(t, ns, "nft", "flush", "chain", "ip", "routerd_cgnat", "postrouting")
	r.start(t)
	out = testenv.Run(t, ns, "nft", "list", "table", "ip", "routerd_cgnat")
	if !has(out, "10.77.0.61 : 203.0.113.2 . 1024", "10.77.0.53 : 203.0.113.1 . 1024", "10.77.0.52 : 203.0.113.1 . 3072", `comment "cgnat tcp up0"`, `comment "cgnat exempt up0"`) {
		t.Fatalf("after restart:\n%s", out)
	}
	m = r.want(t, 200, "GET", "/cgnat", nil)
	if m["assigned"].(float64) != 3 || m["enabled"] != true {
		t.Fatalf("after restart: %v", m)
	}

	// A smaller block moves every mapping (logged), slots stay.
	m = r.want(t, 200, "POST", "/cgnat", map[string]any{"block_size": 1000})
	st = m["status"].(map[string]any)
	if st["subs_per_ip"].(float64) != 64 || st["capacity"].(float64) != 128 {
		t.Fatalf("block 1000: %v", st)
	}
	if m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.1", "port", "2500"), nil); m["mac"] != "AA:00:00:00:00:04" || m["port_start"].(float64) != 2024 {
		t.Fatalf("after the block change: %v", m)
	}
	// Disabling empties the map and the rules, keeps the slots.
	m = r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": "off"})
	if m["message"] != "CGNAT disabled" {
		t.Fatalf("disable: %v", m)
	}
	out = testenv.Run(t, ns, "nft", "list", "table", "ip", "routerd_cgnat")
	if strings.Contains(out, "10.77.0.") || strings.Contains(out, "cgnat tcp") {
		t.Fatalf("disabled but still translating:\n%s", out)
	}
}

// TestPoolNearlyFull: the alert event when assigned passes 90%.
func TestPoolNearlyFull(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	r := newRig(t, ns)
	events := make(chan string, 10)
	sub, err := r.env.NC.Subscribe("router.events.cgnat.alert.cgnat", func(m *nats.Msg) { events <- string(m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// 1 address, ports 1024-1033, blocks of 1: capacity 10.
	r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": true, "iface": "up0", "pool": "203.0.113.9", "port_max": 1033, "block_size": 1})
	ctx := context.Background()
	for i := 1; i <= 10; i++ {
		if err := r.svc.UpsertClient(ctx, client(fmt.Sprintf("AA:00:00:00:01:%02X", i), fmt.Sprintf("10.77.1.%d", i), "")); err != nil {
			t.Fatal(err)
		}
		if i == 9 {
			select {
			case ev := <-events:
				t.Fatalf("alert at 90%%: %s", ev)
			default:
			}
		}
	}
	var ev string
	select {
	case ev = <-events:
	case <-time.After(5 * time.Second):
		t.Fatal("no pool nearly full alert")
	}
	if !has(ev, `"type":"cgnat"`, "nearly full", `"assigned":10`, `"capacity":10`) {
		t.Fatalf("alert: %s", ev)
	}
	// An eleventh waits; a release gives it the slot.
	if err := r.svc.UpsertClient(ctx, client("AA:00:00:00:01:FF", "10.77.1.200", "")); err != nil {
		t.Fatal(err)
	}
	if m := r.want(t, 200, "GET", "/cgnat", nil); m["waiting"].(float64) != 1 || m["free"].(float64) != 0 {
		t.Fatalf("full: %v", m)
	}
	if err := r.svc.RemoveClient(ctx, "AA:00:00:00:01:03"); err != nil {
		t.Fatal(err)
	}
	if m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.9", "port", "1026"), nil); m["mac"] != "AA:00:00:00:01:FF" {
		t.Fatalf("waiting client not given the freed slot: %v", m)
	}
}

// TestPoolShrinks: a smaller capacity leaves the subscribers past it
// without a mapping (their slot kept, counted waiting); the first slot
// freed below the capacity goes to them before new clients.
func TestPoolShrinks(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	r := newRig(t, ns)
	ctx := context.Background()
	r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": true, "iface": "up0", "pool": "203.0.113.9", "port_max": 1026, "block_size": 1})
	for i := 0; i < 3; i++ {
		if err := r.svc.UpsertClient(ctx, client(fmt.Sprintf("AA:00:00:00:02:0%d", i), fmt.Sprintf("10.77.2.%d", 10+i), "")); err != nil {
			t.Fatal(err)
		}
	}
	m := r.want(t, 200, "POST", "/cgnat", map[string]any{"port_max": 1025})
	if st := m["status"].(map[string]any); st["capacity"].(float64) != 2 || st["assigned"].(float64) != 2 || st["waiting"].(float64) != 1 {
		t.Fatalf("shrunk: %v", st)
	}
	if out := testenv.Run(t, ns, "nft", "list", "map", "ip", "routerd_cgnat", "cg_subs"); strings.Contains(out, "10.77.2.12") {
		t.Fatalf("the subscriber past the capacity is still mapped:\n%s", out)
	}
	// A new client waits behind it.
	if err := r.svc.UpsertClient(ctx, client("AA:00:00:00:02:09", "10.77.2.9", "")); err != nil {
		t.Fatal(err)
	}
	if err := r.svc.RemoveClient(ctx, "AA:00:00:00:02:01"); err != nil {
		t.Fatal(err)
	}
	if m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.9", "port", "1025"), nil); m["mac"] != "AA:00:00:00:02:02" {
		t.Fatalf("the freed slot: %v", m)
	}
	if out := testenv.Run(t, ns, "nft", "list", "map", "ip", "routerd_cgnat", "cg_subs"); !strings.Contains(out, "10.77.2.12 : 203.0.113.9 . 1025") {
		t.Fatalf("moved subscriber not mapped:\n%s", out)
	}
	if m := r.want(t, 200, "GET", "/cgnat", nil); m["waiting"].(float64) != 1 || m["assigned"].(float64) != 2 {
		t.Fatalf("the new client should still wait: %v", m)
	}
}
