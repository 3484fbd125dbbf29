package graph

import (
	"strings"
	"testing"
	"time"

	"routerd.dev/services/graph/series"
)

// TestRates: rates are bits per second over the time between readings
// (frames per second for a scale of 1); a counter that went down (a
// restart) gives no sample; readings of a source that did not answer are
// kept for the next round, others that are gone are dropped.
func TestRates(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	byName := func(xs []series.Sample) map[string]series.Sample {
		m := map[string]series.Sample{}
		for _, x := range xs {
			m[x.Name] = x
		}
		return m
	}
	const c1 = "mac:02:00:00:00:00:01"
	none := func(string) bool { return false }
	clients := func(k string) bool { return !strings.HasPrefix(k, ifacePrefix) }
	last := map[string]reading{"if:eth0": {at(0), 1000, 2000, 8}, c1: {at(0), 50, 60, 8}, "onterr:a:0/1/0:1": {at(0), 3, 0, 1}}
	if xs := rates(nil, last, none); len(xs) != 0 {
		t.Fatalf("first round: %v", xs)
	}
	now := map[string]reading{"if:eth0": {at(60), 61000, 2000, 8}, "if:eth1": {at(60), 5, 5, 8}, c1: {at(60), 50 + 7500, 60, 8}, "onterr:a:0/1/0:1": {at(60), 123, 0, 1}}
	got := byName(rates(last, now, none))
	if x := got["if:eth0"]; len(got) != 3 || x.In != 8000 || x.Out != 0 {
		t.Fatalf("second round: %v", got)
	}
	if x := got[c1]; x.In != 1000 || x.Out != 0 {
		t.Fatalf("client: %+v", x)
	}
	if x := got["onterr:a:0/1/0:1"]; x.In != 2 {
		t.Fatalf("errors: %+v", x)
	}
	// The shaper did not answer: no client sample, its reading kept; eth1 gone.
	last = now
	now = map[string]reading{"if:eth0": {at(120), 61000, 2000, 8}}
	got = byName(rates(last, now, clients))
	if len(got) != 1 || got["if:eth0"].In != 0 {
		t.Fatalf("round without the shaper: %v", got)
	}
	if _, ok := now[c1]; !ok {
		t.Fatal("the client's reading was dropped with the shaper's answer")
	}
	if _, ok := now["if:eth1"]; ok {
		t.Fatal("a gone interface's reading kept")
	}
	last = now
	now = map[string]reading{"if:eth0": {at(180), 100, 2000, 8}, c1: {at(180), 7550 + 15000, 60, 8}}
	got = byName(rates(last, now, none))
	if _, ok := got["if:eth0"]; ok || got[c1].In != 1000 {
		t.Fatalf("after a counter restart and over two steps: %v", got)
	}
}
