package netcfg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

func b(v bool) *bool { return &v }

// kindOf is the error's kind and field, for table checks.
func kindOf(err error) (apierr.Kind, any) {
	if err == nil {
		return -1, nil
	}
	ae := apierr.From(err)
	return ae.Kind, ae.Fields["field"]
}

// Addresses on a port: the correction note, persistence, the conflict
// rule (REST refuses; the action form's force overrides), an already-live
// address only persisted, removal; and a restart puts a stored address
// back. Runs on any kernel (veth ports).
func TestPortAddresses(t *testing.T) {
	env := testenv.Start(t)
	ns := testenv.Netns(t)
	port(t, ns)
	testenv.Run(t, ns, "ip", "link", "add", "r1", "type", "veth", "peer", "name", "r1p")
	testenv.Run(t, ns, "ip", "addr", "add", "198.51.100.1/24", "dev", "r1")
	r := start(t, env, ns)
	ctx := context.Background()

	a, err := bus.Invoke(ctx, env.NC, api.AddrAdd, &api.AddrChange{Iface: "r0", IP: "10.9.0.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Code != 201 || a.Assigned != "10.9.0.1/24" || a.Requested != "10.9.0.0/24" || a.Note == "" || !a.Persisted {
		t.Errorf("corrected add: %+v", a)
	}
	if out := testenv.Run(t, ns, "ip", "-4", "addr", "show", "dev", "r0"); !strings.Contains(out, "10.9.0.1/24") {
		t.Errorf("address not in the kernel:\n%s", out)
	}
	for _, tc := range []struct {
		name  string
		op    api.Op[api.AddrChange, api.AddrAnswer]
		in    api.AddrChange
		kind  apierr.Kind
		field any
	}{
		{"no such interface", api.AddrAdd, api.AddrChange{Iface: "nope0", IP: "10.1.0.1/24"}, apierr.KindNotFound, "iface"},
		{"bare address", api.AddrAdd, api.AddrChange{Iface: "r0", IP: "10.1.0.1"}, apierr.KindInvalid, "ip"},
		{"subnet on another interface", api.AddrAdd, api.AddrChange{Iface: "r0", IP: "198.51.100.7/24"}, apierr.KindConflict, nil},
		{"REST force does not override", api.AddrAdd, api.AddrChange{Iface: "r0", IP: "198.51.100.7/24", Force: true}, apierr.KindConflict, nil},
		{"delete what is not there", api.AddrDelete, api.AddrChange{Iface: "r0", IP: "10.8.0.1/24"}, apierr.KindNotFound, "ip"},
	} {
		_, err := bus.Invoke(ctx, env.NC, tc.op, &tc.in)
		if k, f := kindOf(err); k != tc.kind || f != tc.field {
			t.Errorf("%s: %v (kind %v field %v), want kind %v field %v", tc.name, err, k, f, tc.kind, tc.field)
		}
	}
	// An address the operator adds by hand once netcfg runs counts too
	// (the address index follows the kernel's notifications), and stops
	// counting once removed. A try that lands early is taken back.
	try := func(want apierr.Kind) func() error {
		return func() error {
			_, err := bus.Invoke(ctx, env.NC, api.AddrAdd, &api.AddrChange{Iface: "r0", IP: "203.0.113.9/24"})
			if err == nil {
				if _, err := bus.Invoke(ctx, env.NC, api.AddrDelete, &api.AddrChange{Iface: "r0", IP: "203.0.113.9/24"}); err != nil {
					t.Fatal(err)
				}
			}
			if k, _ := kindOf(err); k != want {
				return fmt.Errorf("add beside a hand-made address: %v, want kind %v", err, want)
			}
			return nil
		}
	}
	testenv.Run(t, ns, "ip", "addr", "add", "203.0.113.1/24", "dev", "r1")
	testenv.Eventually(t, 5*time.Second, try(apierr.KindConflict))
	testenv.Run(t, ns, "ip", "addr", "del", "203.0.113.1/24", "dev", "r1")
	testenv.Eventually(t, 5*time.Second, try(-1))
	// The action form's force=1 overrides the conflict.
	actx := api.WithOrigin(ctx, api.Origin{Caller: "127.0.0.1", Action: "ip-add"})
	if _, err := bus.Invoke(actx, env.NC, api.AddrAdd, &api.AddrChange{Iface: "r0", IP: "198.51.100.7/24", Force: true}); err != nil {
		t.Errorf("action form with force: %v", err)
	}
	// Already live: only persisted.
	a, err = bus.Invoke(ctx, env.NC, api.AddrAdd, &api.AddrChange{Iface: "r0", IP: "192.0.2.1/24"})
	if err != nil || !strings.Contains(a.Message, "already live") {
		t.Errorf("live address: %+v %v", a, err)
	}

	// A restart on a kernel that lost the address puts it back.
	r.stop()
	testenv.Run(t, ns, "ip", "addr", "del", "10.9.0.1/24", "dev", "r0")
	start(t, env, ns)
	testenv.Eventually(t, 10e9, func() error {
		if out := testenv.Run(t, ns, "ip", "-4", "addr", "show", "dev", "r0"); !strings.Contains(out, "10.9.0.1/24") {
			return errors.New("10.9.0.1/24 not restored")
		}
		return nil
	})
	if _, err := bus.Invoke(ctx, env.NC, api.AddrDelete, &api.AddrChange{Iface: "r0", IP: "10.9.0.1/24"}); err != nil {
		t.Fatal(err)
	}
	if out := testenv.Run(t, ns, "ip", "-4", "addr", "show", "dev", "r0"); strings.Contains(out, "10.9.0.1") {
		t.Errorf("deleted address still live:\n%s", out)
	}

	// GET /iface sees the ports and their addresses.
	ifs, err := bus.Invoke(ctx, env.NC, api.IfaceListOp, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	var r0 *api.Iface
	for i := range ifs.Interfaces {
		if ifs.Interfaces[i].Name == "r0" {
			r0 = &ifs.Interfaces[i]
		}
	}
	if r0 == nil || r0.Type != "veth" || r0.Status != "UP" || !contains(r0.IPs, "192.0.2.1/24") || r0.Parent != "r0p" {
		t.Errorf("iface r0: %+v", r0)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// VLAN requests that fail before the kernel is asked, on any kernel; on
// one without 802.1Q a create is a 500 carrying the kernel's refusal and
// leaves nothing stored.
func TestVLANRefusals(t *testing.T) {
	env := testenv.Start(t)
	ns := testenv.Netns(t)
	port(t, ns)
	start(t, env, ns)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		in    api.VLANAdd
		kind  apierr.Kind
		field any
	}{
		{"parent missing", api.VLANAdd{Parent: "ge9", VLANID: 10, Protocol: "802.1Q"}, apierr.KindNotFound, "parent"},
		{"ipv4 given as v6", api.VLANAdd{Parent: "r0", VLANID: 10, Protocol: "802.1Q", IP: "2001:db8:1::1/64"}, apierr.KindInvalid, "ip"},
		{"overlapping address", api.VLANAdd{Parent: "r0", VLANID: 10, Protocol: "802.1Q", IP: "192.0.2.9/24"}, apierr.KindConflict, "ip"},
	} {
		_, err := bus.Invoke(ctx, env.NC, api.VLANsCreate, &tc.in)
		if k, f := kindOf(err); k != tc.kind || f != tc.field {
			t.Errorf("%s: %v (kind %v field %v), want %v %v", tc.name, err, k, f, tc.kind, tc.field)
		}
	}
	for _, op := range []api.Op[api.VLANRef, api.VLANDisableAnswer]{api.VLANsDisable} {
		if _, err := bus.Invoke(ctx, env.NC, op, &api.VLANRef{Name: "vlan77"}); apierr.From(err).Kind != apierr.KindNotFound {
			t.Errorf("disable of an unknown VLAN: %v", err)
		}
	}
	_, err := bus.Invoke(ctx, env.NC, api.VLANsCreate, &api.VLANAdd{Parent: "r0", VLANID: 10, Protocol: "802.1Q", Serve: b(false)})
	if err == nil {
		t.Skip("this kernel has 802.1Q: the refusal is not shown here")
	}
	if ae := apierr.From(err); ae.Kind != apierr.KindInternal || !strings.Contains(ae.Message, "802.1Q") {
		t.Errorf("create on a kernel without VLANs: %+v", ae)
	}
	l, err := bus.Invoke(ctx, env.NC, api.VLANsList, &api.None{})
	if err != nil || l.Count != 0 {
		t.Errorf("after the refused create: %+v %v; want nothing stored", l, err)
	}
}

// The whole VLAN life on a full kernel (the VM tier): an S-VLAN on a port,
// a C-VLAN inside it with addresses, the refusals of the state table,
// disable and enable, a restart that changes nothing, delete.
func TestFullKernelVLANLife(t *testing.T) {
	env := testenv.Start(t)
	ns := testenv.Netns(t)
	port(t, ns)
	r := start(t, env, ns)
	ctx := context.Background()
	s, err := bus.Invoke(ctx, env.NC, api.VLANsCreate, &api.VLANAdd{Parent: "r0", VLANID: 200, Protocol: "802.1ad", Serve: b(false)})
	if err != nil {
		if strings.Contains(err.Error(), "802.1Q") {
			t.Skip("this kernel has no 802.1Q/802.1ad: the VM tier (make vm) runs this test")
		}
		t.Fatal(err)
	}
	if s.Name != "svlan200" || s.Code != 201 || s.Served != nil || s.Note == "" {
		t.Errorf("S-VLAN: %+v", s)
	}
	c, err := bus.Invoke(ctx, env.NC, api.VLANsCreate, &api.VLANAdd{Parent: "svlan200", VLANID: 116, Protocol: "802.1Q", IP: "10.116.0.0/24", IPv6: "2001:db8:116::1/64"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "svlan200.116" || c.IP != "10.116.0.1/24" || c.Note == "" || c.Served == nil || c.Warning == "" {
		t.Errorf("C-VLAN: %+v", c)
	}
	for _, tc := range []struct {
		name string
		in   api.VLANAdd
		kind apierr.Kind
	}{
		{"exists", api.VLANAdd{Parent: "svlan200", VLANID: 116, Protocol: "802.1Q"}, apierr.KindConflict},
		{"tag used on the parent", api.VLANAdd{Parent: "r0", VLANID: 200, Protocol: "802.1Q"}, apierr.KindConflict},
		{"address overlaps", api.VLANAdd{Parent: "svlan200", VLANID: 117, Protocol: "802.1Q", IP: "10.116.0.9/24"}, apierr.KindConflict},
	} {
		if _, err := bus.Invoke(ctx, env.NC, api.VLANsCreate, &tc.in); apierr.From(err).Kind != tc.kind {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	link := testenv.Run(t, ns, "ip", "-d", "link", "show", "svlan200.116")
	if !strings.Contains(link, "vlan protocol 802.1Q id 116") || !strings.Contains(link, "alias routerd:netcfg") {
		t.Errorf("C-VLAN link:\n%s", link)
	}
	if outer := testenv.Run(t, ns, "ip", "-d", "link", "show", "svlan200"); !strings.Contains(outer, "vlan protocol 802.1ad id 200") {
		t.Errorf("S-VLAN link:\n%s", outer)
	}
	// Disable: refused for the S-VLAN while the C-VLAN on top is enabled.
	if _, err := bus.Invoke(ctx, env.NC, api.VLANsDisable, &api.VLANRef{Name: "svlan200"}); apierr.From(err).Kind != apierr.KindConflict {
		t.Errorf("disable with an enabled VLAN on top: %v", err)
	}
	d, err := bus.Invoke(ctx, env.NC, api.VLANsDisable, &api.VLANRef{Name: "svlan200.116", Reason: "unpaid"})
	if err != nil || d.Reason != "unpaid" || d.DisabledAt == "" || d.Enabled {
		t.Fatalf("disable: %+v %v", d, err)
	}
	// No dhcp service runs here: the answer says so rather than pretend.
	if !slices.Equal(d.TookOffline, []string{"link"}) || !strings.Contains(d.Warning, "did not answer") {
		t.Errorf("disable without a dhcp service: took_offline %v, warning %q", d.TookOffline, d.Warning)
	}
	l, _ := bus.Invoke(ctx, env.NC, api.VLANsList, &api.None{})
	want := map[string]string{"svlan200": "UP", "svlan200.116": "DISABLED"}
	got := map[string]string{}
	for _, v := range l.VLANs {
		got[v.Name] = v.Status
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status after disable (-want +got):\n%s", diff)
	}
	if _, err := bus.Invoke(ctx, env.NC, api.VLANsDisable, &api.VLANRef{Name: "svlan200.116"}); apierr.From(err).Kind != apierr.KindConflict {
		t.Errorf("second disable: %v", err)
	}
	e, err := bus.Invoke(ctx, env.NC, api.VLANsEnable, &api.VLANRef{Name: "svlan200.116"})
	if err != nil || e.WasDisabledReason != "unpaid" || !contains(e.Restored, "10.116.0.1/24") || !strings.Contains(e.Warning, "did not answer") {
		t.Fatalf("enable: %+v %v", e, err)
	}
	servingThroughDHCP(t, env, ns)
	// A restart with everything in place changes nothing.
	before := testenv.Run(t, ns, "ip", "-d", "-o", "link", "show")
	// IPv6 duplicate address detection ends meanwhile: its flag is no change.
	addrs := func() string {
		return strings.ReplaceAll(testenv.Run(t, ns, "ip", "-o", "addr", "show"), " tentative", "")
	}
	beforeAddr := addrs()
	r.stop()
	start(t, env, ns)
	if diff := cmp.Diff(before, testenv.Run(t, ns, "ip", "-d", "-o", "link", "show")); diff != "" {
		t.Errorf("restart changed the links (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeAddr, addrs()); diff != "" {
		t.Errorf("restart changed the addresses (-before +after):\n%s", diff)
	}
	// Delete: the S-VLAN is refused while the C-VLAN is on it.
	if _, err := bus.Invoke(ctx, env.NC, api.VLANsDelete, &api.VLANRef{Name: "svlan200"}); apierr.From(err).Kind != apierr.KindConflict {
		t.Errorf("delete of a parent: %v", err)
	}
	for _, n := range []string{"svlan200.116", "svlan200"} {
		if _, err := bus.Invoke(ctx, env.NC, api.VLANsDelete, &api.VLANRef{Name: n}); err != nil {
			t.Fatalf("delete %s: %v", n, err)
		}
	}
	if out := testenv.Run(t, ns, "ip", "-o", "link", "show"); strings.Contains(out, "svlan") {
		t.Errorf("links left after delete:\n%s", out)
	}
}

// servingThroughDHCP drives disable and enable of svlan200.116 against a
// stand-in dhcp service's serving.set: what it took offline and restored
// is in the answers, and a refusal rolls the change back whole (the VLAN
// and its link as they were). The stand-in is gone when it returns.
func servingThroughDHCP(t *testing.T, env *testenv.Env, ns *netns.NS) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var refuse atomic.Bool
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "dhcp", Version: "0.0.0", Log: testenv.Log(t), Endpoints: []bus.Endpoint{
			bus.Bind(api.ServingSetOp, func(_ context.Context, in *api.ServingSet) (*api.ServingAnswer, error) {
				calls.Add(1)
				if refuse.Load() {
					return nil, apierr.Internal("etcd away", "the DHCP configuration cannot be stored; rolled back")
				}
				a := &api.ServingAnswer{Iface: in.Iface, Enabled: in.Enabled, TookOffline: []string{}, Restored: []string{}}
				if in.Enabled {
					a.Restored = []string{"DHCPv4", "DHCPv6", "router advertisements"}
				} else {
					a.TookOffline = []string{"DHCPv4", "DHCPv6", "router advertisements"}
				}
				return a, nil
			})}})
	}()
	defer func() { cancel(); <-done }()
	testenv.WaitFor(t, 10*time.Second, "the dhcp stand-in", func() bool {
		_, err := bus.Invoke(context.Background(), env.NC, api.ServingSetOp, &api.ServingSet{Iface: "none0", Enabled: true})
		return err == nil
	})
	bctx := context.Background()
	status := func() string {
		l, err := bus.Invoke(bctx, env.NC, api.VLANsList, &api.None{})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range l.VLANs {
			if v.Name == "svlan200.116" {
				return v.Status
			}
		}
		return "missing"
	}
	link := func() string { return testenv.Run(t, ns, "ip", "link", "show", "svlan200.116") }

	refuse.Store(true)
	n := calls.Load()
	if _, err := bus.Invoke(bctx, env.NC, api.VLANsDisable, &api.VLANRef{Name: "svlan200.116"}); apierr.From(err).Kind != apierr.KindInternal {
		t.Errorf("disable refused by dhcp: %v", err)
	}
	if calls.Load() == n {
		t.Fatal("disable did not ask dhcp")
	}
	if s := status(); s != "UP" || strings.Contains(link(), "state DOWN") {
		t.Errorf("after a disable dhcp refused: status %s, link\n%s", s, link())
	}
	refuse.Store(false)
	d, err := bus.Invoke(bctx, env.NC, api.VLANsDisable, &api.VLANRef{Name: "svlan200.116", Reason: "unpaid"})
	if err != nil || !slices.Equal(d.TookOffline, []string{"DHCPv4", "DHCPv6", "router advertisements", "link"}) || d.Warning != "" {
		t.Fatalf("disable with dhcp: %+v %v", d, err)
	}
	refuse.Store(true)
	if _, err := bus.Invoke(bctx, env.NC, api.VLANsEnable, &api.VLANRef{Name: "svlan200.116"}); apierr.From(err).Kind != apierr.KindInternal {
		t.Errorf("enable refused by dhcp: %v", err)
	}
	if s := status(); s != "DISABLED" || !strings.Contains(link(), "state DOWN") {
		t.Errorf("after an enable dhcp refused: status %s, link\n%s", s, link())
	}
	refuse.Store(false)
	e, err := bus.Invoke(bctx, env.NC, api.VLANsEnable, &api.VLANRef{Name: "svlan200.116"})
	if err != nil || !contains(e.Restored, "DHCPv4") || !contains(e.Restored, "link") || e.Warning != "" || e.WasDisabledReason != "unpaid" {
		t.Fatalf("enable with dhcp: %+v %v", e, err)
	}
	if s := status(); s != "UP" {
		t.Errorf("after enable: status %s", s)
	}
}
