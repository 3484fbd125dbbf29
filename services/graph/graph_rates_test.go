package graph

import (
	"testing"
	"time"

	"routerd.dev/services/graph/series"
)

// TestRates: rates are bits per second over the time between readings; a
// counter that went down (a restart) gives no sample; clients' readings
// are kept through a round without the shaper's answer, and interfaces'
// that are gone are dropped.
func TestRates(t *testing.T) {
	s := New(Deps{})
	t0 := time.Unix(1_800_000_000, 0)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	byName := func(xs []series.Sample) map[string]series.Sample {
		m := map[string]series.Sample{}
		for _, x := range xs {
			m[x.Name] = x
		}
		return m
	}
	if xs := s.rates(map[string]reading{
		"if:eth0": {at(0), 1000, 2000}, "mac:02:00:00:00:00:01": {at(0), 50, 60},
	}, true); len(xs) != 0 {
		t.Fatalf("first round: %v", xs)
	}
	got := byName(s.rates(map[string]reading{
		"if:eth0": {at(60), 61000, 2000}, "if:eth1": {at(60), 5, 5}, "mac:02:00:00:00:00:01": {at(60), 50 + 7500, 60},
	}, true))
	if x := got["if:eth0"]; len(got) != 2 || x.In != 8000 {
		t.Fatalf("second round: %v", got)
	}
	if x := got["mac:02:00:00:00:00:01"]; x.In != 1000 || x.Out != 0 {
		t.Fatalf("client: %+v", x)
	}
	// The shaper did not answer: no client sample, its reading kept; eth1 gone.
	got = byName(s.rates(map[string]reading{"if:eth0": {at(120), 61000, 2000}}, false))
	if len(got) != 1 || got["if:eth0"].In != 0 {
		t.Fatalf("round without the shaper: %v", got)
	}
	if _, ok := s.graphs.last["mac:02:00:00:00:00:01"]; !ok {
		t.Fatal("the client's reading was dropped with the shaper's answer")
	}
	if _, ok := s.graphs.last["if:eth1"]; ok {
		t.Fatal("a gone interface's reading kept")
	}
	got = byName(s.rates(map[string]reading{
		"if:eth0": {at(180), 100, 2000}, "mac:02:00:00:00:00:01": {at(180), 7550 + 15000, 60},
	}, true))
	if _, ok := got["if:eth0"]; ok || got["mac:02:00:00:00:00:01"].In != 1000 {
		t.Fatalf("after a counter restart and over two steps: %v", got)
	}
}
