package shaper_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/shaper"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// sweep reads every subscriber's counters through the bus, limit a page,
// and checks that the pages of the sweep chain and share one read.
func sweep(t *testing.T, env *testenv.Env, limit int) (map[string]api.ShapeCounter, []string, int) {
	t.Helper()
	out := map[string]api.ShapeCounter{}
	var order []string
	var at time.Time
	pages := 0
	after := ""
	for {
		p, err := bus.Invoke(context.Background(), env.NC, api.ShaperCounters, &api.ShapePageRequest{After: after, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if p.Count != len(p.Counters) || p.Count > limit {
			t.Fatalf("page after %q: count %d, %d counters, limit %d", after, p.Count, len(p.Counters), limit)
		}
		if p.At.IsZero() || (pages > 1 && !p.At.Equal(at)) {
			t.Errorf("page %d read at %v, the sweep's first at %v: want one read per sweep", pages, p.At, at)
		}
		at = p.At
		for _, c := range p.Counters {
			out[c.ID] = c
			order = append(order, c.ID)
		}
		if p.Next == "" {
			return out, order, pages
		}
		if p.Next != p.Counters[len(p.Counters)-1].ID {
			t.Fatalf("next %q is not the page's last id", p.Next)
		}
		after = p.Next
	}
}

// shapesOrder is the ids as shapes.page lists them.
func shapesOrder(t *testing.T, env *testenv.Env) []string {
	t.Helper()
	p, err := bus.Invoke(context.Background(), env.NC, api.ShaperPage, &api.ShapePageRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Shapes {
		ids = append(ids, s.ID)
	}
	return ids
}

// storedClass is the class id the shaper's record of id holds.
func storedClass(t *testing.T, env *testenv.Env, id string) uint32 {
	t.Helper()
	resp, err := env.KV.Get(context.Background(), "/router/shaper/shapes/"+url.PathEscape(id))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("record of %s: %v %v", id, err, resp)
	}
	var r struct {
		Class uint32 `json:"class"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
		t.Fatal(err)
	}
	return r.Class
}

// runShaper runs the shaper in ns until stop (or the test's end).
func runShaper(t *testing.T, env *testenv.Env, ns *netns.NS) (stop func()) {
	t.Helper()
	svc, err := shaper.New(shaper.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("shaper did not stop")
		}
	}
	t.Cleanup(stop)
	testenv.Eventually(t, 120*time.Second, func() error {
		_, err := bus.Invoke(context.Background(), env.NC, api.ShaperCounters, &api.ShapePageRequest{Limit: 1})
		return err
	})
	return stop
}

// ping sends count echo requests of size bytes from ns to dst (bounded:
// count and a deadline), from src when set.
func ping(t *testing.T, ns *netns.NS, src, dst string, count, size int) {
	t.Helper()
	args := []string{"-q", "-c", fmt.Sprint(count), "-s", fmt.Sprint(size), "-i", "0.01", "-w", "10"}
	if src != "" {
		args = append(args, "-I", src)
	}
	testenv.Run(t, ns, "ping", append(args, dst)...)
}

// grows waits (a fresh read is taken at most once a second) until the
// counters of id pass the ones in before by at least the given bytes and
// packets in the direction asked, and returns the sweep that showed it.
func grows(t *testing.T, env *testenv.Env, id string, before api.ShapeCounter, down bool, bytes, packets uint64) map[string]api.ShapeCounter {
	t.Helper()
	var got map[string]api.ShapeCounter
	testenv.Eventually(t, 20*time.Second, func() error {
		got, _, _ = sweep(t, env, 2)
		c := got[id]
		db, dp := c.UpBytes-before.UpBytes, c.UpPackets-before.UpPackets
		if down {
			db, dp = c.DownBytes-before.DownBytes, c.DownPackets-before.DownPackets
		}
		if db < bytes || dp < packets {
			return fmt.Errorf("%s: +%d bytes +%d packets (down %v), want at least +%d +%d", id, db, dp, down, bytes, packets)
		}
		return nil
	})
	return got
}

// TestCounters: three subscribers shaped on one veth; bounded pings to
// one of them grow its download counters (bytes and packets of its
// class) and not the others'; pings from it, over IPv4 and over IPv6 (its
// /64), grow its upload counters (its count elements, summed) and not the
// others'; pages of two chain across the page boundary in shapes.page's
// order and share one kernel read; a removed subscriber is gone from the
// next sweep; after the shaper restarts (its reconcile finding the kernel
// in place) the counters are read from the same classes and elements, and
// after a restart on a table without count sets (an earlier version's)
// upload is counted again.
func TestCounters(t *testing.T) {
	l := newLab(t)
	testenv.Run(t, l.sub, "ip", "addr", "add", "10.77.0.11/24", "dev", "eth0")
	env := testenv.Start(t)
	stop := runShaper(t, env, l.router)
	ctx := context.Background()
	a, b, c := "02:00:00:00:00:0a", "02:00:00:00:00:0b", "fibre/7"
	for _, s := range []api.Shape{
		{ID: a, IP: "10.77.0.10", Prefix6: "2001:db8:77::/64", Iface: "sub0", Plan: "p100", DownMbps: 100, UpMbps: 100},
		{ID: b, IP: "10.77.0.11", Iface: "sub0", Plan: "p100", DownMbps: 100, UpMbps: 100},
		{ID: c, IP: "10.77.0.12", Iface: "sub0", Plan: "p20", DownMbps: 20, UpMbps: 20},
	} {
		if _, err := bus.Invoke(ctx, env.NC, api.ShaperSet, &s); err != nil {
			t.Fatal(err)
		}
	}
	before, order, pages := sweep(t, env, 2)
	if len(before) != 3 || pages != 2 {
		t.Fatalf("sweep of 3 in pages of 2: %d subscribers in %d pages: %+v", len(before), pages, before)
	}
	if want := shapesOrder(t, env); fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("counters.page order %v, shapes.page order %v", order, want)
	}
	for _, id := range []string{a, b, c} {
		if x := before[id]; x.Iface != "sub0" || x.IP == "" || x.Plan == "" {
			t.Errorf("%s: %+v", id, x)
		}
	}

	// Download to a: 20 echo replies of 1,000 bytes of data (1,028 of IP).
	ping(t, l.up, "", "10.77.0.10", 20, 1000)
	after := grows(t, env, a, before[a], true, 20*1028, 20)
	if after[b].DownBytes != before[b].DownBytes || after[c].DownBytes != before[c].DownBytes {
		t.Errorf("download counters of the others moved: b %d -> %d, c %d -> %d",
			before[b].DownBytes, after[b].DownBytes, before[c].DownBytes, after[c].DownBytes)
	}
	if after[a].DownDrops != 0 {
		t.Errorf("a's class dropped %d packets of 20 pings at 100 Mbit/s", after[a].DownDrops)
	}
	t.Logf("a before %+v\na after %+v", before[a], after[a])

	// Upload from a: 15 echo requests of 1,000 bytes (1,028 of IP; the
	// count sets count the IP packet) over IPv4, then 10 over IPv6 (1,048
	// of IPv6), both in a's upload.
	ping(t, l.sub, "10.77.0.10", "198.18.0.1", 15, 1000)
	up := grows(t, env, a, after[a], false, 15*1028, 15)
	withIPv6(t, l)
	ping(t, l.sub, "2001:db8:77::10", "2001:db8:18::1", 10, 1000)
	up = grows(t, env, a, up[a], false, 10*1048, 10)
	if up[b].UpBytes != before[b].UpBytes || up[c].UpBytes != before[c].UpBytes {
		t.Errorf("upload counters of the others moved: b %d -> %d, c %d -> %d",
			before[b].UpBytes, up[b].UpBytes, before[c].UpBytes, up[c].UpBytes)
	}
	if up[a].UpPackets < 25 {
		t.Errorf("a's upload %+v: want IPv4 and IPv6 summed", up[a])
	}
	after = up
	t.Logf("a after upload %+v", after[a])

	// Removed: gone from the next page at once. Its class, which
	// counted traffic to b, becomes a spare, and the next subscriber new
	// on the interface takes it (the pool gives the last given back):
	// d's counters start at zero all the same.
	ping(t, l.up, "", "10.77.0.11", 10, 500)
	grows(t, env, b, before[b], true, 10*528, 10)
	bClass := storedClass(t, env, b)
	if _, err := bus.Invoke(ctx, env.NC, api.ShaperRemove, &api.ShapeRef{ID: b}); err != nil {
		t.Fatal(err)
	}
	got, _, _ := sweep(t, env, 2)
	if _, ok := got[b]; ok || len(got) != 2 {
		t.Errorf("after removing %s: %+v", b, got)
	}
	d := "02:00:00:00:00:0d"
	if _, err := bus.Invoke(ctx, env.NC, api.ShaperSet, &api.Shape{ID: d, IP: "10.77.0.13", Iface: "sub0", Plan: "p100", DownMbps: 100, UpMbps: 100}); err != nil {
		t.Fatal(err)
	}
	if dClass := storedClass(t, env, d); dClass != bClass {
		t.Fatalf("d took class %x, not b's %x: the test does not show what it should", dClass, bClass)
	}
	time.Sleep(1100 * time.Millisecond)
	got, _, _ = sweep(t, env, 2)
	if x := got[d]; x.DownBytes != 0 || x.DownPackets != 0 || x.UpBytes != 0 {
		t.Errorf("d, on b's class: %+v, want zeros", x)
	}

	// A restart: the reconcile finds the classes in place, and the
	// counters are read from them.
	stop()
	// A count element of no subscriber (left by a crash, say) is removed
	// by the reconcile; the subscribers' own stay, with their counts.
	testenv.Run(t, l.router, "nft", "add", "element", "inet", "routerd_shaper", "cnt4", "{ 10.77.0.99 }")
	stop = runShaper(t, env, l.router)
	if nft := testenv.Run(t, l.router, "nft", "list", "set", "inet", "routerd_shaper", "cnt4"); strings.Contains(nft, "10.77.0.99") || !strings.Contains(nft, "10.77.0.10") {
		t.Errorf("count set after the restart (want 10.77.0.99 gone, 10.77.0.10 there):\n%s", nft)
	}
	time.Sleep(1100 * time.Millisecond)
	got, _, _ = sweep(t, env, 5000)
	if x := got[d]; x.DownBytes != 0 || x.DownPackets != 0 {
		t.Errorf("d after the restart: %+v, want zeros", x)
	}
	if len(got) != 3 || got[a].DownBytes < after[a].DownBytes || got[a].DownPackets < after[a].DownPackets ||
		got[a].UpBytes < after[a].UpBytes || got[a].UpPackets < after[a].UpPackets {
		t.Errorf("after the restart: %+v (a had %+v)", got, after[a])
	}
	ping(t, l.up, "", "10.77.0.10", 10, 500)
	grows(t, env, a, got[a], true, 10*528, 10)

	// A table of an earlier version: no count sets (the chain's rules are
	// written again whatever they were). The restart's reconcile makes
	// them and their elements.
	stop()
	testenv.Run(t, l.router, "nft", "flush chain inet routerd_shaper forward; delete set inet routerd_shaper cnt4; delete set inet routerd_shaper cnt6_64")
	runShaper(t, env, l.router)
	nft := testenv.Run(t, l.router, "nft", "list", "table", "inet", "routerd_shaper")
	if !strings.Contains(nft, "set cnt4") || !strings.Contains(nft, "set cnt6_64") || !strings.Contains(nft, "ip saddr @cnt4") {
		t.Fatalf("the restart did not make the count sets:\n%s", nft)
	}
	t.Logf("the table after the upgrade:\n%s", nft)
	time.Sleep(1100 * time.Millisecond)
	got, _, _ = sweep(t, env, 5000)
	ping(t, l.sub, "10.77.0.10", "198.18.0.1", 5, 100)
	ping(t, l.sub, "2001:db8:77::10", "2001:db8:18::1", 5, 100)
	grows(t, env, a, got[a], false, 5*128+5*148, 10)
}
