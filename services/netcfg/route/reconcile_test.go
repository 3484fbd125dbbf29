package route

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/apierr"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// kernelTable gives a fresh namespace a router port (veth r0, 192.0.2.1/24
// and 2001:db8::1/64, its peer r0p up) and a Table on it storing in a fresh
// etcd under /router/netcfg/.
func kernelTable(t *testing.T) (*netns.NS, *testenv.Env, *Table) {
	t.Helper()
	ns := testenv.Netns(t)
	nl, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "r0"}, PeerName: "r0p"}); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	for _, n := range []string{"r0", "r0p", "lo"} {
		l, err := nl.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		// No link-local addresses, so the listings hold no fe80::/64 routes
		// that appear whenever address configuration gets round to it.
		if err := nl.LinkSetIP6AddrGenMode(l, 1 /* IN6_ADDR_GEN_MODE_NONE */); err != nil {
			t.Fatal(err)
		}
		if err := nl.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := nl.LinkByName("r0")
	for _, a := range []string{"192.0.2.1/24", "2001:db8::1/64"} {
		addr, _ := netlink.ParseAddr(a)
		addr.Flags = 0x02 // IFA_F_NODAD: usable at once
		if err := nl.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
	}
	env := testenv.Start(t)
	return ns, env, NewTable(store.New(env.KV, "netcfg"), nl, nil)
}

// listing is the namespace's whole main routing table of both families as
// `ip route` and `ip -6 route` print it (trailing blanks trimmed).
func listing(t *testing.T, ns *netns.NS) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"route"}, {"-6", "route"}} {
		b.WriteString("$ ip " + strings.Join(args, " ") + "\n")
		for _, line := range strings.Split(strings.TrimSpace(testenv.Run(t, ns, "ip", args...)), "\n") {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
	}
	return b.String()
}

func storeRoutes(t *testing.T, tb *Table, routes ...Route) {
	t.Helper()
	for _, r := range routes {
		if _, err := tb.store().Txn().Put(tb.key(r), r).Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func storedKeys(t *testing.T, env *testenv.Env) []string {
	t.Helper()
	resp, err := env.KV.Get(context.Background(), store.Root+"netcfg/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// Reconcile makes the kernel's routes of netcfg's protocol (213) what the
// store holds, both ways, and leaves every other route alone: the operator's
// (proto static), dhcp's delegated route (proto 214), the kernel's own. A
// second Reconcile changes nothing.
func TestReconcileBothWays(t *testing.T) {
	ns, _, tb := kernelTable(t)
	ctx := context.Background()
	for _, cmd := range [][]string{
		// The operator's own routes, one of them also stored (below).
		{"route", "add", "198.51.100.0/24", "via", "192.0.2.9", "proto", "static"},
		{"route", "add", "198.51.101.0/24", "via", "192.0.2.9", "proto", "static"},
		{"-6", "route", "add", "2001:db8:99::/48", "via", "2001:db8::9", "proto", "static"},
		// A delegated prefix's route, dhcp's.
		{"-6", "route", "add", "2001:db8:d0::/56", "via", "2001:db8::d", "dev", "r0", "proto", "214"},
		// netcfg's, not stored (a crash between a store delete and the
		// kernel's, or an older replica's): removed, including one whose
		// destination a stored route with another gateway needs.
		{"route", "add", "203.0.113.0/24", "via", "192.0.2.7", "proto", "213"},
		{"route", "add", "10.20.0.0/16", "via", "192.0.2.5", "proto", "213"},
		{"-6", "route", "add", "2001:db8:77::/48", "via", "2001:db8::7", "proto", "213"},
		// netcfg's and stored: kept as it is.
		{"route", "add", "192.168.50.0/24", "via", "192.0.2.50", "proto", "213"},
	} {
		testenv.Run(t, ns, "ip", cmd...)
	}
	storeRoutes(t, tb,
		Route{Prefix: "default", Via: "192.0.2.254", Family: "ipv4", Created: "2026-01-01 00:00:01"},
		Route{Prefix: "10.20.0.0/16", Via: "192.0.2.6", Family: "ipv4", Created: "2026-01-01 00:00:02"},
		Route{Prefix: "198.18.5.0/24", Dev: "r0", Family: "ipv4", Created: "2026-01-01 00:00:03"},
		Route{Prefix: "192.168.50.0/24", Via: "192.0.2.50", Family: "ipv4", Created: "2026-01-01 00:00:04"},
		Route{Prefix: "198.51.100.0/24", Via: "192.0.2.9", Family: "ipv4", Created: "2026-01-01 00:00:05"},
		Route{Prefix: "2001:db8:5::/48", Via: "2001:db8::2", Dev: "r0", Family: "ipv6", Created: "2026-01-01 00:00:06"},
		Route{Prefix: "2001:db8:6::/48", Via: "2001:db8::2", Dev: "gone0", Family: "ipv6", Created: "2026-01-01 00:00:07"},
	)

	res, err := tb.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantRes := Reconciled{
		Added: []string{"default via 192.0.2.254", "10.20.0.0/16 via 192.0.2.6", "198.18.5.0/24 dev r0", "2001:db8:5::/48 via 2001:db8::2 dev r0"},
		Removed: []string{
			"10.20.0.0/16 via 192.0.2.5 dev r0 proto routerd",
			"203.0.113.0/24 via 192.0.2.7 dev r0 proto routerd",
			"2001:db8:77::/48 via 2001:db8::7 dev r0 proto routerd metric 1024",
		},
		Problems: []string{"2001:db8:6::/48 via 2001:db8::2 dev gone0: interface gone0 not found"},
	}
	if diff := cmp.Diff(wantRes, res); diff != "" {
		t.Errorf("first Reconcile (-want +got):\n%s", diff)
	}

	const want = `$ ip route
default via 192.0.2.254 dev r0 proto 213
10.20.0.0/16 via 192.0.2.6 dev r0 proto 213
192.0.2.0/24 dev r0 proto kernel scope link src 192.0.2.1
192.168.50.0/24 via 192.0.2.50 dev r0 proto 213
198.18.5.0/24 dev r0 proto 213 scope link
198.51.100.0/24 via 192.0.2.9 dev r0 proto static
198.51.101.0/24 via 192.0.2.9 dev r0 proto static
$ ip -6 route
2001:db8::/64 dev r0 proto kernel metric 256 pref medium
2001:db8:5::/48 via 2001:db8::2 dev r0 proto 213 metric 1024 pref medium
2001:db8:99::/48 via 2001:db8::9 dev r0 proto static metric 1024 pref medium
2001:db8:d0::/56 via 2001:db8::d dev r0 proto 214 metric 1024 pref medium
`
	first := listing(t, ns)
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("kernel routes after the first Reconcile (-want +got):\n%s", diff)
	}

	res, err = tb.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Reconciled{Problems: wantRes.Problems}, res); diff != "" {
		t.Errorf("second Reconcile did something (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(first, listing(t, ns)); diff != "" {
		t.Errorf("second Reconcile changed the kernel's routes (-want +got):\n%s", diff)
	}

	// The live listing names the protocols.
	live, err := tb.Live(2 /* AF_INET */)
	if err != nil {
		t.Fatal(err)
	}
	if want := "10.20.0.0/16 via 192.0.2.6 dev r0 proto routerd"; !contains(live, want) {
		t.Errorf("Live lacks %q: %q", want, live)
	}
	live6, err := tb.Live(10 /* AF_INET6 */)
	if err != nil {
		t.Fatal(err)
	}
	if want := "2001:db8:d0::/56 via 2001:db8::d dev r0 proto routerd-dhcp metric 1024"; !contains(live6, want) {
		t.Errorf("Live lacks %q: %q", want, live6)
	}
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

// Add stores first and applies second; when the kernel refuses the route,
// the stored record goes too, and the kernel is as it was.
func TestAddRefusedByTheKernelLeavesNothingStored(t *testing.T) {
	ns, env, tb := kernelTable(t)
	ctx := context.Background()
	before := listing(t, ns)

	_, err := tb.Add(ctx, Input{Prefix: "10.9.0.0/16", Via: "100.64.0.1", Comment: "unreachable gateway"})
	var ae *apierr.Error
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "kernel refused") {
		t.Fatalf("Add with an unreachable gateway: err = %v, want an API error saying the kernel refused", err)
	}
	if keys := storedKeys(t, env); len(keys) != 0 {
		t.Errorf("stored after the kernel refused: %q", keys)
	}
	if diff := cmp.Diff(before, listing(t, ns)); diff != "" {
		t.Errorf("kernel routes changed (-want +got):\n%s", diff)
	}

	// An accepted add is stored and in the kernel with netcfg's protocol;
	// Delete takes it out of both.
	if _, err := tb.Add(ctx, Input{Prefix: "10.9.0.0/16", Via: "192.0.2.2"}); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Run(t, ns, "ip", "route", "show", "10.9.0.0/16"); strings.TrimSpace(got) != "10.9.0.0/16 via 192.0.2.2 dev r0 proto 213" {
		t.Errorf("ip route show 10.9.0.0/16 = %q", got)
	}
	if _, removed, err := tb.Delete(ctx, "10.9.0.0/16", "", ""); err != nil || !removed {
		t.Fatalf("Delete: removed %v, err %v", removed, err)
	}
	if keys := storedKeys(t, env); len(keys) != 0 {
		t.Errorf("stored after Delete: %q", keys)
	}
	if diff := cmp.Diff(before, listing(t, ns)); diff != "" {
		t.Errorf("kernel routes after Delete (-want +got):\n%s", diff)
	}
}

// Deleting a managed route the kernel holds under another protocol (the
// operator's identical route, there before it was added) removes it from
// the store only.
func TestDeleteLeavesAnotherProtocolsRoute(t *testing.T) {
	ns, env, tb := kernelTable(t)
	ctx := context.Background()
	testenv.Run(t, ns, "ip", "route", "add", "198.51.100.0/24", "via", "192.0.2.9", "proto", "static")
	before := listing(t, ns)
	if _, err := tb.Add(ctx, Input{Prefix: "198.51.100.0/24", Via: "192.0.2.9"}); err != nil {
		t.Fatal(err)
	}
	if _, removed, err := tb.Delete(ctx, "198.51.100.0/24", "", ""); err != nil || removed {
		t.Fatalf("Delete: kernel_removed %v, err %v; want false, nil", removed, err)
	}
	if keys := storedKeys(t, env); len(keys) != 0 {
		t.Errorf("stored after Delete: %q", keys)
	}
	if diff := cmp.Diff(before, listing(t, ns)); diff != "" {
		t.Errorf("kernel routes (-want +got):\n%s", diff)
	}
}

// A table writing through a store fenced by a lock that lapsed refuses
// changes (503) and changes neither etcd nor the kernel.
func TestFencedTableAfterTheLockLapsed(t *testing.T) {
	ns, env, tb := kernelTable(t)
	ctx := context.Background()
	lock, err := store.TryLock(ctx, env.KV, "netcfg/test")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock(ctx)
	tb.Use(store.New(env.KV, "netcfg").Fenced(lock))
	if _, err := tb.Add(ctx, Input{Prefix: "10.1.0.0/16", Via: "192.0.2.2"}); err != nil {
		t.Fatalf("Add while holding the lock: %v", err)
	}
	before := listing(t, ns)

	resp, err := env.KV.Get(ctx, store.Root+"locks/netcfg/test", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("lock key: %v %v", resp, err)
	}
	if _, err := env.KV.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"add", func() error { _, err := tb.Add(ctx, Input{Prefix: "10.2.0.0/16", Via: "192.0.2.2"}); return err }},
		{"delete", func() error { _, _, err := tb.Delete(ctx, "10.1.0.0/16", "", ""); return err }},
	} {
		// Unavailable (503): another replica serves now.
		var ae *apierr.Error
		if err := op.do(); !errors.As(err, &ae) || !strings.Contains(err.Error(), "lost this host's lock") {
			t.Errorf("%s after the lock lapsed: err = %v, want the API error saying the lock was lost", op.name, err)
		}
	}
	if got, want := storedKeys(t, env), []string{store.Root + "netcfg/routes/10.1.0.0_16~192.0.2.2~"}; !cmp.Equal(got, want) {
		t.Errorf("stored = %q, want %q", got, want)
	}
	if diff := cmp.Diff(before, listing(t, ns)); diff != "" {
		t.Errorf("kernel routes changed (-want +got):\n%s", diff)
	}
}
