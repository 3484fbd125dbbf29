package dhcp

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/testenv"
)

// TestKernelDHCPv6AndPD: dhclient -6 -N -P gets an address from the derived
// pool and a delegated prefix; the prefix's route via the client appears in
// the router namespace, survives an engine restart, and goes on release.
func TestKernelDHCPv6AndPD(t *testing.T) {
	t.Parallel() // own namespaces and keyspace; mostly waits on clients and timers
	needRoot(t, "dhclient")
	tp := newTopo(t)
	h := newHarness(t, tp, kernelConfig(tp))
	hook, hookLog := tp.script(t)
	lf, pf := filepath.Join(tp.dir, "dhclient6.leases"), filepath.Join(tp.dir, "dhclient6.pid")
	dhclient := func(extra ...string) (string, error) {
		args := append([]string{"dhclient", "-6", "-N", "-P", "-1", "-v", "-sf", hook, "-lf", lf, "-pf", pf}, extra...)
		return tp.client(t, 60*time.Second, append(args, tp.cliIf)...)
	}
	if out, err := dhclient(); err != nil {
		t.Fatalf("dhclient -6: %v\n%s", err, out)
	}
	na := h.waitLease("IA_NA", func(l lease.Lease) bool { return l.Kind == lease.NA })
	pd := h.waitLease("IA_PD", func(l lease.Lease) bool { return l.Kind == lease.PD })
	if !netip.MustParsePrefix("2001:db8:77::1000/116").Contains(na.Addr) {
		t.Errorf("IA_NA %v outside the derived pool ::1000-::ffff", na.Addr)
	}
	if got, want := pd.Prefix().String(), "2001:db8:a000:1000::/56"; got != want {
		t.Errorf("delegated %s, want the slice's first prefix %s", got, want)
	}
	b, _ := os.ReadFile(hookLog)
	if !strings.Contains(string(b), na.Addr.String()) || !strings.Contains(string(b), pd.Prefix().String()) {
		t.Errorf("dhclient was not told its address and prefix:\n%s", b)
	}
	routeShown := func() string {
		return testenv.Run(t, tp.srv, "ip", "-6", "route", "show", pd.Prefix().String())
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testenv.WaitFor(t, 5*time.Second, what, cond)
	}
	waitFor("delegated route", func() bool { return strings.Contains(routeShown(), "via fe80::") })
	if !strings.Contains(routeShown(), "dev "+tp.srvIf) {
		t.Errorf("route %q not on the served interface", routeShown())
	}
	if lines, err := h.eng.SyncRoutes(true); err != nil || !strings.HasPrefix(lines[0], "in sync") {
		t.Errorf("dry-run sync after grant: %v %v", lines, err)
	}

	// Remove the route behind the engine's back: the reconciler reports and
	// restores it, and applying twice changes nothing.
	testenv.Run(t, tp.srv, "ip", "-6", "route", "del", pd.Prefix().String())
	lines, err := h.eng.SyncRoutes(true)
	if err != nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "add "+pd.Prefix().String()) {
		t.Errorf("dry-run report %v %v", lines, err)
	}
	if routeShown() != "" {
		t.Errorf("dry run changed the kernel")
	}
	h.eng.SyncRoutes(false)
	if lines, _ := h.eng.SyncRoutes(false); !strings.HasPrefix(lines[0], "in sync") {
		t.Errorf("second apply changed something: %v", lines)
	}

	h.restart()
	if _, ok := h.eng.Lease(pd.Prefix()); !ok {
		t.Fatalf("delegated prefix lost in restart")
	}
	waitFor("route after restart", func() bool { return strings.Contains(routeShown(), "via fe80::") })

	tp.client(t, 10*time.Second, "sh", "-c", "kill $(cat "+pf+")")
	if out, err := dhclient("-r"); err != nil {
		t.Fatalf("dhclient -6 -r: %v\n%s", err, out)
	}
	waitFor("route withdrawn on release", func() bool { return routeShown() == "" })
	if _, ok := h.stored()[pd.Key()]; ok {
		t.Errorf("released prefix still in etcd")
	}
}

// TestKernelRouterAdvertisement: rdisc6 in the subscriber namespace sees the
// M and O flags, the on-link prefix, RDNSS and DNSSL; an RA sent by the
// subscriber does not give the router a default route.
func TestKernelRouterAdvertisement(t *testing.T) {
	t.Parallel() // own namespaces and keyspace; mostly waits on clients and timers
	needRoot(t, "rdisc6")
	tp := newTopo(t)
	newHarness(t, tp, kernelConfig(tp))
	out, err := tp.client(t, 30*time.Second, "rdisc6", "-1", "-w", "3000", "-m", tp.cliIf)
	if err != nil {
		t.Fatalf("rdisc6: %v\n%s", err, out)
	}
	for _, want := range []string{
		"Stateful address conf. : Yes",
		"Stateful other conf. : Yes",
		"Router lifetime : 1800",
		"Prefix : 2001:db8:77::/64",
		"Recursive DNS server : 2001:db8:77::53",
		"DNS search list : isp.example",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("rdisc6 output lacks %q:\n%s", want, out)
		}
	}

	if _, err := run(t, 20*time.Second, "/usr/bin/python3", "-c", "import scapy.all"); err != nil {
		t.Skip("python3-scapy not installed: rogue RA part skipped")
	}
	rogue := `
import sys
from scapy.all import Ether, IPv6, ICMPv6ND_RA, ICMPv6NDOptPrefixInfo, sendp
sendp(Ether(dst="33:33:00:00:00:01")/IPv6(dst="ff02::1", hlim=255)/ICMPv6ND_RA(routerlifetime=1800)/
      ICMPv6NDOptPrefixInfo(prefix="2001:db8:bad::", prefixlen=64), iface=sys.argv[1], count=3, verbose=0)
`
	if out, err := tp.client(t, 30*time.Second, "/usr/bin/python3", "-c", rogue, tp.cliIf); err != nil {
		t.Fatalf("scapy RA: %v\n%s", err, out)
	}
	// What is checked is that nothing happens, so there is no event to
	// wait for: the sleep gives the router's kernel time to (wrongly) act
	// on the RAs.
	time.Sleep(500 * time.Millisecond)
	routes := testenv.Run(t, tp.srv, "ip", "-6", "route", "show")
	if strings.Contains(routes, "default") || strings.Contains(routes, "2001:db8:bad") {
		t.Errorf("router learnt from a subscriber's RA:\n%s", routes)
	}
}
