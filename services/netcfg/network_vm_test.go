package netcfg_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestFullKernelNetworkBondsAndVLANs (the VM tier: bonding and 802.1Q): a
// bond applied, checked in `ip -d link` and the rendered .netdev,
// confirmed; a VLAN with an address on it; a mode change rolled back by
// the timer (the bond remade as it was, the VLAN and its address back);
// the bond's removal refused while a VLAN is on it; the VLAN refusals of
// /network/vlan-* (local, default route, a registered client, CGNAT, each
// owner a stand-in on the bus), then disable, enable and delete; the bond
// removed and rolled back by request.
func TestFullKernelNetworkBondsAndVLANs(t *testing.T) {
	ns := testenv.Netns(t)
	port(t, ns)
	veth(t, ns, "p1", "p1x")
	veth(t, ns, "p2", "p2x")
	env := testenv.Start(t)
	r := &netRig{t: t, env: env, ns: ns, state: t.TempDir()}
	r.start(10 * time.Second)
	r.do(api.NetworkAdoptOp, map[string]any{}, 201)
	v := r.version()

	bond := map[string]any{"members": []string{"p1", "p2"}, "mode": "802.3ad",
		"params": map[string]any{"lacp-rate": "fast", "transmit-hash-policy": "layer3+4", "mii-monitor-interval": 100}}
	st, m := call(t, env, api.NetworkApplyOp.Subject(), "POST", map[string]any{"version": v, "bonds": map[string]any{"bond0": bond}})
	if st == 500 && strings.Contains(fmt.Sprint(m["error"], m["detail"]), "bond") {
		t.Skipf("this kernel has no bonding: the VM tier (make vm) runs this test: %v", m)
	}
	if st != 200 {
		t.Fatalf("apply bond: %d %v", st, m)
	}
	out := testenv.Run(t, ns, "ip", "-d", "link", "show", "bond0")
	for _, want := range []string{"bond mode 802.3ad", "miimon 100", "lacp_rate fast", "xmit_hash_policy layer3+4", "alias routerd:netcfg network"} {
		if !strings.Contains(out, want) {
			t.Errorf("ip -d link show bond0 lacks %q:\n%s", want, out)
		}
	}
	if out := testenv.Run(t, ns, "ip", "link", "show", "p1"); !strings.Contains(out, "master bond0") {
		t.Errorf("p1 not enslaved:\n%s", out)
	}
	if f := r.file("10-routerd-bond0.netdev"); !strings.Contains(f, "Kind=bond") || !strings.Contains(f, "LACPTransmitRate=fast") || !strings.Contains(r.file("10-routerd-p1.network"), "Bond=bond0") {
		t.Errorf("rendered files:\n%s\n%s", f, r.file("10-routerd-p1.network"))
	}
	r.do(api.NetworkConfirmOp, nil, 200)
	v = r.version()

	// A VLAN with an address on the bond.
	if a := r.do(api.NetVLANAddOp, map[string]any{"parent": "bond0", "vlan_id": 100, "ip": "10.100.0.1/24", "serve": false}, 200); a["name"] != "vlan100" {
		t.Fatalf("vlan-add: %v", a)
	}
	if f := r.file("10-routerd-vlan100.netdev"); !strings.Contains(f, "Kind=vlan") || !strings.Contains(f, "Id=100") || !strings.Contains(r.file("10-routerd-bond0.network"), "VLAN=vlan100") {
		t.Errorf("the VLAN's files:\n%s\n%s", f, r.file("10-routerd-bond0.network"))
	}
	doc := r.do(api.NetworkGet, nil, 200)
	kinds := map[string]string{}
	for _, i := range doc["interfaces"].([]any) {
		rec := i.(map[string]any)
		kinds[rec["name"].(string)] = rec["kind"].(string) + "/" + rec["owner"].(string)
		if rec["name"] == "bond0" && rec["bond_mode"] != "802.3ad" {
			t.Errorf("bond0 record: %v", rec)
		}
	}
	if kinds["bond0"] != "bond/network" || kinds["vlan100"] != "vlan/vlans" || kinds["p1"] != "port/network" {
		t.Errorf("kinds/owners: %v", kinds)
	}
	if d := toStrings(doc["drift"]); len(d) != 0 {
		t.Errorf("drift: %v", d)
	}

	// A mode change, not confirmed: the timer puts the bond back as it
	// was, with the VLAN and its address on it.
	r.do(api.NetworkApplyOp, map[string]any{"version": v, "bonds": map[string]any{"bond0": map[string]any{"mode": "active-backup", "params": map[string]any{"lacp-rate": nil}}}}, 200)
	if out := testenv.Run(t, ns, "ip", "-d", "link", "show", "bond0"); !strings.Contains(out, "mode active-backup") {
		t.Errorf("mode change not applied:\n%s", out)
	}
	testenv.WaitFor(t, 30*time.Second, "the timer rolls the mode back", func() bool {
		m := r.do(api.NetworkGet, nil, 200)
		return m["pending"] == nil && m["version"] == v
	})
	if out := testenv.Run(t, ns, "ip", "-d", "link", "show", "bond0"); !strings.Contains(out, "bond mode 802.3ad") || !strings.Contains(out, "lacp_rate fast") {
		t.Errorf("bond after the rollback:\n%s", out)
	}
	if out := testenv.Run(t, ns, "ip", "addr", "show", "vlan100"); !strings.Contains(out, "10.100.0.1/24") {
		t.Errorf("VLAN and address after the bond was remade:\n%s", out)
	}
	if m := r.do(api.NetworkPlanOp, map[string]any{"bonds": map[string]any{"bond0": map[string]any{"remove": true}}}, 400); !strings.Contains(strings.Join(toStrings(m["problems"]), " "), "VLANs on it") {
		t.Errorf("bond removal with a VLAN on it: %v", m)
	}

	// The VLAN refusals.
	refusal := func(op interface{ Subject() string }, body map[string]any, want string) {
		t.Helper()
		m := r.do(op, body, 409)
		if got := strings.Join(toStrings(m["refused"]), " | "); !strings.Contains(got, want) {
			t.Errorf("%s %v: refused %q, want %q", op.Subject(), body, got, want)
		}
	}
	refusal(api.NetVLANDisableOp, map[string]any{"name": "vlan100", "local": "10.100.0.1"}, "you are connected to")
	testenv.Run(t, ns, "ip", "route", "add", "default", "via", "10.100.0.254")
	refusal(api.NetVLANDeleteOp, map[string]any{"name": "vlan100"}, "default route")
	if c := r.do(api.NetVLANCheckOp, map[string]any{"name": "vlan100", "action": "delete"}, 200); len(toStrings(c["refused"])) != 1 || len(toStrings(c["impact"])) == 0 {
		t.Errorf("vlan-check: %v", c)
	}
	testenv.Run(t, ns, "ip", "route", "del", "default")
	var clients, cgnat atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "subscribers", Version: "0.0.0", Log: testenv.Log(t), Endpoints: []bus.Endpoint{
		bus.Bind(api.ClientsPage, func(_ context.Context, in *api.ClientPageRequest) (*api.ClientPage, error) {
			cs := []api.Client{}
			if clients.Load() && in.Iface == "vlan100" {
				cs = append(cs, api.Client{MAC: "AA:BB:CC:DD:EE:02", IP: "10.100.0.50", Iface: "vlan100", Gateway: "10.100.0.1"})
			}
			return &api.ClientPage{Count: len(cs), Clients: cs}, nil
		})}})
	go bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "cgnat", Version: "0.0.0", Log: testenv.Log(t), Endpoints: []bus.Endpoint{
		bus.Bind(api.CGNATUses, func(_ context.Context, in *api.NATIface) (*api.NATUse, error) {
			return &api.NATUse{CGNAT: cgnat.Load() && in.Iface == "vlan100", Fix: "switch CGNAT to another interface first", Forwards: []string{"tcp 203.0.113.5:8080 -> 10.100.0.50:80"}}, nil
		})}})
	testenv.WaitFor(t, 10*time.Second, "stand-ins", func() bool {
		_, e1 := bus.Call(context.Background(), env.NC, api.ClientsPage.Subject(), &pb.Request{Method: "GET"})
		_, e2 := bus.Call(context.Background(), env.NC, api.CGNATUses.Subject(), &pb.Request{Method: "GET", Args: []byte(`{"iface":"x"}`)})
		return e1 == nil && e2 == nil
	})
	clients.Store(true)
	refusal(api.NetVLANDisableOp, map[string]any{"name": "vlan100"}, "clients are registered on vlan100")
	if st, m := call(t, env, api.VLANsDelete.Subject(), "DELETE", map[string]any{"name": "vlan100"}); st != 409 {
		t.Errorf("DELETE /vlans with a client on it: %d %v", st, m)
	}
	clients.Store(false)
	cgnat.Store(true)
	refusal(api.NetVLANDeleteOp, map[string]any{"name": "vlan100"}, "CGNAT translates through vlan100")
	cgnat.Store(false)
	if d := r.do(api.NetVLANDisableOp, map[string]any{"name": "vlan100", "reason": "test"}, 200); len(toStrings(d["forwards_still_active"])) != 1 {
		t.Errorf("forwards_still_active: %v", d)
	}
	r.do(api.NetVLANEnableOp, map[string]any{"name": "vlan100"}, 200)
	r.do(api.NetVLANDeleteOp, map[string]any{"name": "vlan100"}, 200)

	// The bond removed, then rolled back by request.
	r.do(api.NetworkApplyOp, map[string]any{"version": v, "bonds": map[string]any{"bond0": map[string]any{"remove": true}}}, 200)
	if out := testenv.Run(t, ns, "ip", "link", "show"); strings.Contains(out, "bond0") {
		t.Errorf("bond0 still there after its removal:\n%s", out)
	}
	r.do(api.NetworkRollbackOp, nil, 200)
	if out := testenv.Run(t, ns, "ip", "link", "show", "p2"); !strings.Contains(out, "master bond0") {
		t.Errorf("after the rollback p2 is not in bond0:\n%s", out)
	}
}
