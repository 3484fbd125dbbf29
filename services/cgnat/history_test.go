package cgnat_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"routerd.dev/shared/testenv"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// TestLookupAtPastTime: GET /cgnat/lookup with `at` answers from the audit
// log who held a port at that time, across a release and a reuse of the
// slot.
func TestLookupAtPastTime(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	clk := &clock{t: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
	r := newRigClock(t, ns, testenv.Start(t), clk.Now)
	ctx := context.Background()
	r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": true, "iface": "up0", "pool": "203.0.113.7"})
	clk.Set(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	if err := r.svc.UpsertClient(ctx, client("AA:00:00:00:00:0A", "10.77.0.10", "alpha")); err != nil {
		t.Fatal(err)
	}
	clk.Set(time.Date(2026, 11, 24, 11, 0, 0, 0, time.UTC))
	if err := r.svc.RemoveClient(ctx, "AA:00:00:00:00:0A"); err != nil {
		t.Fatal(err)
	}
	clk.Set(time.Date(2026, 11, 24, 11, 30, 0, 0, time.UTC))
	if err := r.svc.UpsertClient(ctx, client("AA:00:00:00:00:0B", "10.77.0.11", "beta")); err != nil {
		t.Fatal(err)
	}
	at := func(when string) map[string]any {
		return r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.7", "port", "2000", "at", when), nil)
	}
	if m := at("2026-11-24 10:30"); m["found"] != true || m["mac"] != "AA:00:00:00:00:0A" || m["private_ip"] != "10.77.0.10" ||
		m["hostname"] != "alpha" || m["source"] != "audit_log" || m["slot"].(float64) != 0 || m["port_start"].(float64) != 1024 {
		t.Fatalf("at 10:30: %v", m)
	}
	if m := at("2026-11-24T11:15:00Z"); m["found"] != false || m["at"] != "2026-11-24T11:15:00Z" {
		t.Fatalf("at 11:15 (released): %v", m)
	}
	if m := at("2026-11-24 12:00:00"); m["mac"] != "AA:00:00:00:00:0B" {
		t.Fatalf("at 12:00: %v", m)
	}
	if m := at("2026-11-24 09:30"); m["found"] != false {
		t.Fatalf("before any assignment: %v", m)
	}
	// Another port's block on the same address was nobody's.
	if m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.7", "port", "4000", "at", "2026-11-24 10:30"), nil); m["found"] != false {
		t.Fatalf("another block: %v", m)
	}
	if m := r.want(t, 400, "GET", "/cgnat/lookup"+q("public_ip", "203.0.113.7", "port", "2000", "at", "yesterday"), nil); m["field"] != "at" {
		t.Fatalf("bad at: %v", m)
	}
}
