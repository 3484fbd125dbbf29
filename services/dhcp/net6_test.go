package dhcp

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestDHCPv6PDAndDNSOverTheBus drives DHCPv6, prefix delegation, DNS and
// option 82 through their operations with dhclient -6 -N -P on the wire:
// POST /net6 + POST /pd, then the client gets an address and a prefix of
// the interface's slice, the delegated route appears and GET /pd counts
// it; POST /dns, then a renewal carries the new resolvers (in the client's
// lease file).
func TestDHCPv6PDAndDNSOverTheBus(t *testing.T) {
	t.Parallel()
	needRoot(t, "dhclient")
	tp := newTopo(t)
	env := testenv.Start(t)
	ctx := context.Background()
	svc, err := NewService(ServiceDeps{NC: env.NC, KV: env.KV, NS: tp.target(t), Log: testenv.Log(t), ListenRetry: 200 * time.Millisecond,
		PD: PDDefaults{Pool: netip.MustParsePrefix("2001:db8:a000::/48"), Len: 56, Slice: 16, Reserve: 16}})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(sctx) }()
	t.Cleanup(func() { cancel(); <-done })
	r := &runningService{svc: svc}
	r.waitServing(t, env, 0)
	eng, _ := svc.engine()
	testenv.Run(t, tp.srv, "ip", "link", "add", "bare0", "type", "veth", "peer", "name", "bare1")

	// POST /net6: 404 without a global address; 201 with the derived pool,
	// no resolver yet.
	_, err = bus.Invoke(ctx, env.NC, api.Net6Add, &api.Net6Iface{Iface: "bare0"})
	wantErr(t, "POST /net6 without an address", err, apierr.KindNotFound, "no global IPv6 address")
	n6, err := bus.Invoke(ctx, env.NC, api.Net6Add, &api.Net6Iface{Iface: tp.srvIf})
	if err != nil {
		t.Fatal(err)
	}
	if n6.Code != 201 || n6.Network6 != (api.Net6Block{Iface: tp.srvIf, Gateway: "2001:db8:77::1", Prefix: 64, Network: "2001:db8:77::/64"}) ||
		n6.Pool == nil || *n6.Pool != (api.Pool6{Start: "2001:db8:77::1000", End: "2001:db8:77::ffff"}) ||
		n6.DNS != nil || n6.Note == "" || !n6.RADVD.OK {
		t.Fatalf("POST /net6: %+v", n6)
	}
	if _, err := bus.Invoke(ctx, env.NC, api.NetAdd, &api.NetIface{Iface: tp.srvIf}); err != nil {
		t.Fatal(err)
	}
	// Pools and lifetimes.
	_, err = bus.Invoke(ctx, env.NC, api.Net6Pool, &api.Net6PoolSet{Iface: tp.srvIf, Start: "2001:db8:78::1", End: "2001:db8:78::9"})
	wantErr(t, "pool outside", err, apierr.KindInvalid, "outside")
	if p, err := bus.Invoke(ctx, env.NC, api.Net6Pool, &api.Net6PoolSet{Iface: tp.srvIf, Start: "2001:db8:77::2000", End: "2001:db8:77::2fff"}); err != nil ||
		p.Pool.Start != "2001:db8:77::2000" || p.Network != "2001:db8:77::/64" {
		t.Fatalf("POST /net6/pool: %+v %v", p, err)
	}
	if p, err := bus.Invoke(ctx, env.NC, api.Net6Pool, &api.Net6PoolSet{Iface: tp.srvIf}); err != nil || p.Pool.Start != "2001:db8:77::1000" {
		t.Fatalf("POST /net6/pool derived: %+v %v", p, err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.Net6Lease, &api.Net6LeaseSet{Valid: 7200, Preferred: 9000})
	wantErr(t, "preferred above valid", err, apierr.KindInvalid, "preferred")
	if l, err := bus.Invoke(ctx, env.NC, api.Net6Lease, &api.Net6LeaseSet{Valid: 7200}); err != nil || len(l.Changed) != 2 || eng.Config().Lifetimes6.Preferred != time.Hour {
		t.Fatalf("POST /net6/lease: %+v %v", l, err)
	}

	// DNS: global, then what each interface gets.
	d, err := bus.Invoke(ctx, env.NC, api.DNSSetOp, &api.DNSSet{V4: []string{"10.77.0.53"}, V6: []string{"2001:db8:77::53"}, Domain: "isp.example"})
	if err != nil || len(d.Changed) != 3 || d.Status.IPv6[0] != "2001:db8:77::53" {
		t.Fatalf("POST /dns: %+v %v", d, err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.DNSSetOp, &api.DNSSet{V4: []string{"2001:db8::1"}})
	wantErr(t, "POST /dns v4 not IPv4", err, apierr.KindInvalid, "v4")
	_, err = bus.Invoke(ctx, env.NC, api.DNSSetOp, &api.DNSSet{})
	wantErr(t, "POST /dns empty", err, apierr.KindInvalid, "")
	_, err = bus.Invoke(ctx, env.NC, api.DNSSetOp, &api.DNSSet{Iface: "bare0", V4: []string{"1.1.1.1"}})
	wantErr(t, "POST /dns/{iface} unserved", err, apierr.KindNotFound, "not served")

	// Prefix delegation.
	_, err = bus.Invoke(ctx, env.NC, api.PDAdd, &api.PDSet{Iface: tp.srvIf, Size: 3})
	wantErr(t, "POST /pd size 3", err, apierr.KindInvalid, "power of two")
	_, err = bus.Invoke(ctx, env.NC, api.PDAdd, &api.PDSet{Iface: "bare0"})
	wantErr(t, "POST /pd unserved", err, apierr.KindNotFound, "no subnet6 block")
	_, err = bus.Invoke(ctx, env.NC, api.PDResize, &api.PDSet{Iface: tp.srvIf, Size: 32})
	wantErr(t, "resize without delegation", err, apierr.KindNotFound, "no delegation")
	pd, err := bus.Invoke(ctx, env.NC, api.PDAdd, &api.PDSet{Iface: tp.srvIf})
	if err != nil {
		t.Fatal(err)
	}
	wantCap := api.PDCapacity{PrefixesTotal: 256, PrefixesReserved: 16, PrefixesUsed: 16, PrefixesFree: 224, LargestFreeRun: 224,
		VLANsAtDefaultSlice: 1, VLANsFreeAtDefaultSlice: 14}
	if pd.Code != 201 || pd.Pool.Index != 16 || pd.Pool.Start != "2001:db8:a000:1000::/56" || pd.Pool.End != "2001:db8:a000:1f00::/56" ||
		pd.PrefixLen != 56 || pd.Capacity != wantCap || pd.Next == nil || *pd.Next != 32 || pd.Replaced != nil {
		t.Fatalf("POST /pd: %+v (next %v)", pd, pd.Next)
	}
	moved, err := bus.Invoke(ctx, env.NC, api.PDAdd, &api.PDSet{Iface: tp.srvIf, Size: 32})
	if err != nil || moved.Pool.Index != 32 || moved.Replaced == nil || moved.Replaced.Index != 16 || moved.Warning == "" {
		t.Fatalf("POST /pd with a new size: %+v %v", moved, err)
	}
	if back, err := bus.Invoke(ctx, env.NC, api.PDResize, &api.PDSet{Iface: tp.srvIf, Size: 16}); err != nil || back.Pool.Index != 16 {
		t.Fatalf("resize back: %+v %v", back, err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.PDResize, &api.PDSet{Iface: tp.srvIf, Size: 16})
	wantErr(t, "resize to the same size", err, apierr.KindConflict, "already")
	_, err = bus.Invoke(ctx, env.NC, api.PDAdd, &api.PDSet{Iface: tp.srvIf, Size: 512})
	if e := wantErr(t, "POST /pd too big", err, apierr.KindExhausted, "no room"); e.Fields["requested"] != float64(512) || e.Fields["largest_free_run"] != float64(240) {
		t.Errorf("507 fields: %v", e.Fields)
	}

	// The wire: dhclient -6 -N -P gets an address and a prefix of the slice.
	svcWait := func(n int) { r.waitServing(t, env, n) }
	svcWait(3)
	lf, pf := filepath.Join(tp.dir, "dhclient6.leases"), filepath.Join(tp.dir, "dhclient6.pid")
	hook, _ := tp.script(t)
	dhclient := func(extra ...string) {
		t.Helper()
		args := append([]string{"dhclient", "-6", "-N", "-P", "-1", "-v", "-sf", hook, "-lf", lf, "-pf", pf}, extra...)
		if out, err := tp.client(t, 60*time.Second, append(args, tp.cliIf)...); err != nil {
			t.Fatalf("dhclient -6: %v\n%s", err, out)
		}
	}
	dhclient()
	var na, dp lease.Lease
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, l := range eng.Leases() {
			switch l.Kind {
			case lease.NA:
				na = l
			case lease.PD:
				dp = l
			}
		}
		if !na.Addr.IsValid() || !dp.Addr.IsValid() {
			return fmt.Errorf("leases: na %v pd %v", na.Addr, dp.Addr)
		}
		return nil
	})
	if !netip.MustParsePrefix("2001:db8:77::1000/116").Contains(na.Addr) || dp.Prefix().String() != "2001:db8:a000:1000::/56" {
		t.Fatalf("leased %v and %v", na.Addr, dp.Prefix())
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		st, err := bus.Invoke(ctx, env.NC, api.PDGet, &api.None{})
		if err != nil {
			return err
		}
		if st.LiveCount != 1 || !strings.HasPrefix(st.LiveRoutes[0], "2001:db8:a000:1000::/56 via fe80::") {
			return fmt.Errorf("GET /pd live: %d %v", st.LiveCount, st.LiveRoutes)
		}
		if st.Pool != "2001:db8:a000::/48" || st.PerVLAN[tp.srvIf].Network6 != "2001:db8:77::/64" || st.Usable != 240 || st.DefaultSlice != 16 {
			return fmt.Errorf("GET /pd: %+v", st)
		}
		return nil
	})
	if out := testenv.Run(t, tp.srv, "ip", "-6", "route", "show", dp.Prefix().String()); !strings.Contains(out, "via fe80::") {
		t.Errorf("delegated route: %q", out)
	}
	if sy, err := bus.Invoke(ctx, env.NC, api.PDSync, &api.PDSyncRequest{Dry: true}); err != nil || !strings.HasPrefix(sy.Output[0], "in sync") {
		t.Errorf("pd sync: %+v %v", sy, err)
	}
	if b := readFile(t, lf); !strings.Contains(b, "2001:db8:77::53") {
		t.Errorf("lease file lacks the resolver:\n%s", b)
	}

	// New resolvers reach the client at its next exchange.
	if _, err := bus.Invoke(ctx, env.NC, api.DNSSetOp, &api.DNSSet{V6: []string{"2001:db8:77::54"}}); err != nil {
		t.Fatal(err)
	}
	tp.client(t, 10*time.Second, "sh", "-c", "kill $(cat "+pf+")")
	dhclient()
	if b := readFile(t, lf); !strings.Contains(b, "2001:db8:77::54") {
		t.Errorf("after POST /dns and a renewal the lease file lacks the new resolver:\n%s", b)
	}

	// Per-interface overrides and clearing.
	_, err = bus.Invoke(ctx, env.NC, api.DNSIfaceDelete, &api.DNSIface{Iface: tp.srvIf})
	wantErr(t, "DELETE /dns/{iface} without override", err, apierr.KindNotFound, "no DNS override")
	if o, err := bus.Invoke(ctx, env.NC, api.DNSSetOp, &api.DNSSet{Iface: tp.srvIf, V6: []string{"2001:db8:77::55"}}); err != nil || o.Override.IPv6[0] != "2001:db8:77::55" {
		t.Fatalf("POST /dns/{iface}: %+v %v", o, err)
	}
	if w, err := bus.Invoke(ctx, env.NC, api.DNSSetOp, &api.DNSSet{V6: []string{"2001:db8:77::56"}}); err != nil || len(w.Shadowing) != 1 || w.Warning == "" {
		t.Fatalf("POST /dns shadowed: %+v %v", w, err)
	}
	st, err := bus.Invoke(ctx, env.NC, api.DNSGet, &api.None{})
	if err != nil || st.PerVLAN.IPv6["2001:db8:77::/64"][0] != "2001:db8:77::55" || st.Effective[0].IPv6Source != "per-vlan" || st.Effective[0].IPv4Source != "global" {
		t.Fatalf("GET /dns: %+v %v", st, err)
	}
	if del, err := bus.Invoke(ctx, env.NC, api.DNSIfaceDelete, &api.DNSIface{Iface: tp.srvIf}); err != nil || del.Removed.IPv6[0] != "2001:db8:77::55" {
		t.Fatalf("DELETE /dns/{iface}: %+v %v", del, err)
	}
	if c, err := bus.Invoke(ctx, env.NC, api.DNSClearOp, &api.DNSClear{Global: "v4"}); err != nil || c.Cleared[0] != "ipv4" || len(c.GlobalNow.IPv4) != 0 {
		t.Fatalf("DELETE /dns global=v4: %+v %v", c, err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.DNSClearOp, &api.DNSClear{Global: "v4"})
	wantErr(t, "DELETE /dns nothing set", err, apierr.KindNotFound, "no global")

	// Pinned prefixes for registered clients.
	_, err = bus.Invoke(ctx, env.NC, api.PDAssignOp, &api.PDAssign{MAC: "02:aa:00:00:02:01"})
	wantErr(t, "assign unknown client", err, apierr.KindNotFound, "no registered client")
	for i, mac := range []string{"02:aa:00:00:02:01", "02:aa:00:00:02:02"} {
		if _, err := bus.Invoke(ctx, env.NC, api.ReservationPutClient, &api.ClientReservation{MAC: mac, IP: fmt.Sprintf("10.77.0.%d", 20+i)}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := bus.Invoke(ctx, env.NC, api.PDAssignOp, &api.PDAssign{MAC: "02-aa-00-00-02-01"})
	if err != nil || a.Prefix6 != "2001:db8:a000::/56" {
		t.Fatalf("assign: %+v %v", a, err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.PDAssignOp, &api.PDAssign{MAC: "02:aa:00:00:02:02", Prefix: "2001:db8:a000::"})
	wantErr(t, "assign a pinned prefix", err, apierr.KindConflict, "2001:db8:a000::/56")
	_, err = bus.Invoke(ctx, env.NC, api.PDAssignOp, &api.PDAssign{MAC: "02:aa:00:00:02:02", Prefix: "2001:db8:a000:1400::/56"})
	wantErr(t, "assign outside the band", err, apierr.KindInvalid, "reserved band")
	if st, _ := bus.Invoke(ctx, env.NC, api.PDGet, &api.None{}); len(st.Pinned) != 1 || st.Pinned[0].MAC != "02:AA:00:00:02:01" {
		t.Errorf("GET /pd pinned: %+v", st.Pinned)
	}
	if _, err := bus.Invoke(ctx, env.NC, api.PDUnassignOp, &api.PDUnassign{MAC: "02:aa:00:00:02:01"}); err != nil {
		t.Fatal(err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.PDUnassignOp, &api.PDUnassign{MAC: "02:aa:00:00:02:01"})
	wantErr(t, "unassign twice", err, apierr.KindNotFound, "no pinned prefix")

	// Option 82.
	on := true
	if _, err := bus.Invoke(ctx, env.NC, api.Option82SetOp, &api.Option82Set{Enable: &on}); err != nil {
		t.Fatal(err)
	}
	if o, err := bus.Invoke(ctx, env.NC, api.Option82Get, &api.None{}); err != nil || !o.CaptureEnabled || o.RecentLog == nil {
		t.Fatalf("GET /option82: %+v %v", o, err)
	}

	// DELETE /pd, DELETE /net6 (releases the slice).
	if _, err := bus.Invoke(ctx, env.NC, api.PDDelete, &api.PDIface{Iface: tp.srvIf}); err != nil {
		t.Fatal(err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.PDDelete, &api.PDIface{Iface: tp.srvIf})
	wantErr(t, "DELETE /pd twice", err, apierr.KindNotFound, "no delegation")
	if _, err := bus.Invoke(ctx, env.NC, api.PDAdd, &api.PDSet{Iface: tp.srvIf}); err != nil {
		t.Fatal(err)
	}
	d6, err := bus.Invoke(ctx, env.NC, api.Net6Delete, &api.Net6Iface{Iface: tp.srvIf})
	if err != nil || d6.RemovedPDPool == nil || d6.RemovedPDPool.Size != 16 || !d6.RADVD.OK {
		t.Fatalf("DELETE /net6: %+v %v", d6, err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.Net6Delete, &api.Net6Iface{Iface: tp.srvIf})
	wantErr(t, "DELETE /net6 twice", err, apierr.KindNotFound, "not served")
}
