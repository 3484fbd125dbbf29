package shaper_test

import (
	"context"
	"math"
	"regexp"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// kernelState is what `tc` and `nft` show of the shaper's objects, for
// comparing before and after an idempotent step.
func kernelState(t *testing.T, ns *netns.NS) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(testenv.Run(t, ns, "tc", "qdisc", "show", "dev", "sub0"))
	b.WriteString(testenv.Run(t, ns, "tc", "class", "show", "dev", "sub0"))
	b.WriteString(testenv.Run(t, ns, "tc", "filter", "show", "dev", "sub0"))
	b.WriteString(testenv.Run(t, ns, "ip", "-br", "link"))
	b.WriteString(testenv.Run(t, ns, "nft", "list", "table", "inet", "routerd_shaper"))
	// Counters of unclassified packets (neighbour discovery) and of the
	// count sets' elements are traffic, not state.
	out := counters.ReplaceAllString(b.String(), "direct_packets_stat -")
	return elemCounters.ReplaceAllString(out, "counter packets - bytes -")
}

var (
	counters     = regexp.MustCompile(`direct_packets_stat \d+`)
	elemCounters = regexp.MustCompile(`counter packets \d+ bytes \d+`)
)

func within(t *testing.T, what string, got, want float64) {
	t.Helper()
	t.Logf("%s: %.2f Mbit/s (plan %v)", what, got, want)
	if math.Abs(got-want) > want*0.10 {
		t.Errorf("%s: %.2f Mbit/s, want %v ±10%%", what, got, want)
	}
}

// TestShapedByPlan: a subscriber with a 20 Mbit/s plan (on a spare class
// it took) measured with iperf3 through the router in both directions, over IPv4 and over IPv6
// (its upload policed by one limit object for both families), reshaped to 50 Mbit/s by
// ShaperPlan without a restart, and the kernel state unchanged by applying
// the same shape and the reconcile a second time.
func TestShapedByPlan(t *testing.T) {
	l := newLab(t)
	env := testenv.Start(t)
	svc := start(t, env, l.router)
	ctx := context.Background()

	// Another subscriber first, and the pool filled after it: the
	// measured one takes a spare class (made at 1 Mbit/s), so the rates
	// below are a spare's, changed.
	if _, err := bus.Invoke(ctx, env.NC, api.ShaperSet, &api.Shape{ID: "other", IP: "10.77.0.20", Iface: "sub0", Plan: "p5", DownMbps: 5, UpMbps: 5}); err != nil {
		t.Fatal(err)
	}
	settle(t, svc)
	spares := svc.Spares()["sub0"][0]
	shape := &api.Shape{ID: "02:00:00:00:00:0a", IP: "10.77.0.10", Prefix6: "2001:db8:77::/64", Iface: "sub0", Plan: "p20", DownMbps: 20, UpMbps: 20}
	a, err := bus.Invoke(ctx, env.NC, api.ShaperSet, shape)
	if err != nil {
		t.Fatal(err)
	}
	if a.Code != 201 {
		t.Fatalf("set: code %d, want 201", a.Code)
	}
	if got := svc.Spares()["sub0"][0]; got != spares-1 {
		t.Fatalf("spares %d after the set, want %d (one taken)", got, spares-1)
	}
	within(t, "download at 20", iperf(t, l, true), 20)
	within(t, "upload at 20", iperf(t, l, false), 20)
	// IPv6 by the same subscriber: its address's interval in down6 and
	// up6, the upload through the same limit object as its IPv4.
	withIPv6(t, l)
	within(t, "IPv6 download at 20", iperfTo(t, l, "2001:db8:18::1", true), 20)
	within(t, "IPv6 upload at 20", iperfTo(t, l, "2001:db8:18::1", false), 20)
	nft := testenv.Run(t, l.router, "nft", "list", "table", "inet", "routerd_shaper")
	t.Logf("the shaper's table:\n%s", nft)
	if strings.Count(nft, `: "up-10.77.0.10"`) != 2 {
		t.Errorf("the subscriber's IPv4 and IPv6 upload elements do not both name its one limit object:\n%s", nft)
	}

	before := kernelState(t, l.router)
	a, err = bus.Invoke(ctx, env.NC, api.ShaperSet, shape)
	if err != nil {
		t.Fatal(err)
	}
	if a.Code != 200 {
		t.Errorf("second set: code %d, want 200", a.Code)
	}
	res, err := svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Added+res.Changed+res.Removed != 0 || len(res.Problems) != 0 {
		t.Errorf("second reconcile changed the kernel: %+v", res)
	}
	if after := kernelState(t, l.router); after != before {
		t.Errorf("kernel state changed by applying twice:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	pa, err := bus.Invoke(ctx, env.NC, api.ShaperPlan, &api.PlanRates{Plan: "p20", DownMbps: 50, UpMbps: 50})
	if err != nil {
		t.Fatal(err)
	}
	if pa.Reshaped != 1 {
		t.Errorf("reshaped %d, want 1", pa.Reshaped)
	}
	within(t, "download at 50", iperf(t, l, true), 50)
	within(t, "upload at 50", iperf(t, l, false), 50)

	st, err := bus.Invoke(ctx, env.NC, api.ShaperStatus, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Count != 2 || len(st.Ifaces) != 1 || st.Ifaces[0].Upload != "police" || st.Ifaces[0].Ifb != "" || st.Ifaces[0].Leaf == "" {
		t.Errorf("status: %+v", st)
	}
	t.Logf("status: %+v", st)
}
