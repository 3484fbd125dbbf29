package cgnat_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestForwardOnSwitchedOffVLAN: a forward whose client lies on a disabled
// VLAN is kept (listed with applied:false) but not in the kernel, and
// applied once the VLAN is enabled (netcfg's vlan.enabled event). netcfg
// is a stand-in on the bus answering vlans.list (VLANs need 802.1Q, which
// this kernel lacks).
func TestForwardOnSwitchedOffVLAN(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	env := testenv.Start(t)
	var mu sync.Mutex
	enabled := false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "netcfg", Version: "0.0.0", Log: testenv.Log(t), Endpoints: []bus.Endpoint{
			bus.Bind(api.VLANsList, func(context.Context, *api.None) (*api.VLANList, error) {
				mu.Lock()
				defer mu.Unlock()
				return &api.VLANList{Count: 1, VLANs: []api.VLAN{{Name: "vlan100", Parent: "eth0", VLANID: 100, IPs: []string{"10.77.5.1/24"}, Enabled: enabled}}}, nil
			}),
		}})
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, "netcfg"); missing != nil {
		t.Fatal("stand-in netcfg did not register")
	}
	r := newRigOn(t, ns, env)

	m := r.want(t, 201, "POST", "/pf", map[string]any{"public_port": 2222, "client_ip": "10.77.5.9", "client_port": 22})
	if f := m["forward"].(map[string]any); f["applied"] != false || !strings.Contains(m["message"].(string), "switched off") {
		t.Fatalf("forward on a disabled VLAN: %v", m)
	}
	if out := testenv.Run(t, ns, "nft", "list", "chain", "ip", "routerd_cgnat", "prerouting"); strings.Contains(out, "10.77.5.9") {
		t.Fatalf("a forward to a switched-off VLAN is in the kernel:\n%s", out)
	}
	mu.Lock()
	enabled = true
	mu.Unlock()
	bus.NewPublisher(env.NC, "netcfg", testenv.Log(t)).Publish(event.VLANEnabled, nil, map[string]any{"name": "vlan100"})
	testenv.WaitFor(t, 5*time.Second, "the forward applied after vlan.enabled", func() bool {
		_, m := r.do(t, "GET", "/pf", nil)
		f := m["forwards"].([]any)
		return len(f) == 1 && f[0].(map[string]any)["applied"] == true
	})
	if out := testenv.Run(t, ns, "nft", "list", "chain", "ip", "routerd_cgnat", "prerouting"); !strings.Contains(out, "dnat to 10.77.5.9:22") {
		t.Fatalf("the forward is not in the kernel after the VLAN came back:\n%s", out)
	}
}
