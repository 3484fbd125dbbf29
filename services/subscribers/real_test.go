package subscribers_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/services/firewall"
	"routerd.dev/services/shaper"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

func init() {
	realOwners = func(t testing.TB, env *testenv.Env, ns *netns.NS, log *slog.Logger, run func(func(context.Context) error)) (bool, bool) {
		sh, err := shaper.New(shaper.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		fw, err := firewall.New(firewall.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		run(sh.Run)
		run(fw.Run)
		return true, true
	}
}

// TestClientEffectsInTheKernel runs the real shaper and firewall in the
// router's namespace: a client's plan becomes its shaping (the shaper's
// record and its nftables map element), its suspension a block (the
// firewall's record and set element), a plan change and a resume change
// exactly those, a delete removes every one, and the reconcile at start
// puts back what the owners lost.
func TestClientEffectsInTheKernel(t *testing.T) {
	r := startRealRig(t)
	ctx := context.Background()
	r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 20, "up_mbps": 10})
	r.do(t, "POST", "/plans", map[string]any{"name": "silver", "down_mbps": 50, "up_mbps": 20})
	if st, m := r.do(t, "POST", "/clients", map[string]any{"mac": "02:00:00:00:05:01", "ip": "10.50.0.51", "ipv6": "2001:db8:50::51", "plan": "gold"}); st != 201 {
		t.Fatalf("add: %d %v", st, m)
	}
	shapes := func() map[string]api.Shape {
		t.Helper()
		p, err := bus.Invoke(ctx, r.env.NC, api.ShaperPage, &api.ShapePageRequest{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]api.Shape{}
		for _, s := range p.Shapes {
			m[s.ID] = s
		}
		return m
	}
	blocks := func() map[string]api.Block {
		t.Helper()
		p, err := bus.Invoke(ctx, r.env.NC, api.FirewallBlocks, &api.BlockPageRequest{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]api.Block{}
		for _, b := range p.Blocks {
			m[b.ID] = b
		}
		return m
	}
	nft := func() string { return testenv.Run(t, r.ns, "nft", "list", "ruleset") }
	if s, ok := shapes()["02:00:00:00:05:01"]; !ok || s.DownMbps != 20 || s.UpMbps != 10 || s.Iface != r.iface {
		t.Fatalf("shaped: %+v %v", s, ok)
	}
	if !strings.Contains(nft(), "10.50.0.51") {
		t.Errorf("no map element for the client in:\n%s", nft())
	}
	// A plan change reshapes it; new plan rates reshape it again.
	r.do(t, "POST", "/plan", map[string]any{"mac": "02:00:00:00:05:01", "plan": "silver"})
	if s := shapes()["02:00:00:00:05:01"]; s.DownMbps != 50 || s.Plan != "silver" {
		t.Errorf("after set-plan: %+v", s)
	}
	r.do(t, "POST", "/plans", map[string]any{"name": "silver", "down_mbps": 60, "up_mbps": 30})
	if s := shapes()["02:00:00:00:05:01"]; s.DownMbps != 60 || s.UpMbps != 30 {
		t.Errorf("after the plan's new rates: %+v", s)
	}
	// Suspension: a block; resume takes it away.
	if st, m := r.do(t, "POST", "/suspend/02:00:00:00:05:01", nil); st != 200 {
		t.Fatalf("suspend: %d %v", st, m)
	}
	if b, ok := blocks()["02:00:00:00:05:01"]; !ok || b.IP != "10.50.0.51" {
		t.Errorf("blocked: %+v %v", b, ok)
	}
	if out := testenv.Run(t, r.ns, "nft", "list", "table", "inet", "routerd_firewall"); !strings.Contains(out, "10.50.0.51") || !strings.Contains(out, "2001:db8:50::51") {
		t.Errorf("no set element for the suspended client:\n%s", out)
	}
	r.do(t, "POST", "/resume/02:00:00:00:05:01", nil)
	if _, ok := blocks()["02:00:00:00:05:01"]; ok {
		t.Errorf("still blocked after resume")
	}
	// Lost while the service is down: put back at start.
	r.do(t, "POST", "/suspend/02:00:00:00:05:01", nil)
	r.stopSubs()
	if _, err := bus.Invoke(ctx, r.env.NC, api.ShaperRemove, &api.ShapeRef{ID: "02:00:00:00:05:01"}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Invoke(ctx, r.env.NC, api.FirewallUnblock, &api.BlockRef{ID: "02:00:00:00:05:01"}); err != nil {
		t.Fatal(err)
	}
	r.startSubscribers(t)
	eventually(t, "shape and block put back", func() bool {
		_, s := shapes()["02:00:00:00:05:01"]
		_, b := blocks()["02:00:00:00:05:01"]
		return s && b
	})
	// A second reconcile finds the owners' records equal to what the
	// clients need and changes nothing.
	if res, err := r.svc.Clients().Reconcile(ctx); err != nil || res.Clients != 1 || res.Reserved+res.Shaped+res.Blocked+res.Unreserved+res.Unshaped+res.Unblocked+res.Failed != 0 {
		t.Errorf("second reconcile: %+v %v", res, err)
	}
	// Delete: nothing left.
	if st, m := r.do(t, "DELETE", "/clients/02:00:00:00:05:01", nil); st != 200 {
		t.Fatalf("delete: %d %v", st, m)
	}
	if len(shapes()) != 0 || len(blocks()) != 0 || strings.Contains(nft(), "10.50.0.51") {
		t.Errorf("left after delete: %v %v\n%s", shapes(), blocks(), nft())
	}
}
