package firewall_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/services/firewall"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// standIns serve, on the bus, what the subscribers and dhcp services give
// the firewall (clients.page, leases.list, networks.list) and publish
// their events: the contract the firewall is built against, without the
// services' own dependencies (dhcp's engine, the shaper).
type standIns struct {
	mu      sync.Mutex
	clients []api.Client
	leases  []api.Lease
	subs    *bus.Publisher
	dhcp    *bus.Publisher
}

func startStandIns(t *testing.T, env *testenv.Env) *standIns {
	t.Helper()
	si := &standIns{subs: bus.NewPublisher(env.NC, "subscribers", testenv.Log(t)), dhcp: bus.NewPublisher(env.NC, "dhcp", testenv.Log(t))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() {
		_ = bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "subscribers", Version: "0.0.1", Log: testenv.Log(t), Endpoints: []bus.Endpoint{
			bus.Bind(api.ClientsPage, func(ctx context.Context, in *api.ClientPageRequest) (*api.ClientPage, error) {
				si.mu.Lock()
				defer si.mu.Unlock()
				return &api.ClientPage{Count: len(si.clients), Clients: append([]api.Client{}, si.clients...)}, nil
			}),
		}})
		done <- struct{}{}
	}()
	go func() {
		_ = bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "dhcp", Version: "0.0.1", Log: testenv.Log(t), Endpoints: []bus.Endpoint{
			bus.Bind(api.LeasesList, func(ctx context.Context, in *api.LeaseFilter) (*api.LeaseList, error) {
				si.mu.Lock()
				defer si.mu.Unlock()
				return &api.LeaseList{Count: len(si.leases), Total: len(si.leases), Leases: append([]api.Lease{}, si.leases...)}, nil
			}),
			bus.Bind(api.NetworksList, func(ctx context.Context, in *api.None) (*api.NetworkList, error) {
				return &api.NetworkList{Networks: []api.ServedNetwork{}}, nil
			}),
		}})
		done <- struct{}{}
	}()
	t.Cleanup(func() { cancel(); <-done; <-done })
	testenv.WaitFor(t, 5*time.Second, "stand-ins up", func() bool {
		return bus.Up(env.NC, "subscribers", 100*time.Millisecond) && bus.Up(env.NC, "dhcp", 100*time.Millisecond)
	})
	return si
}

func macOf(t *testing.T, ns *netns.NS, name string) string {
	t.Helper()
	nl, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	l, err := nl.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ToUpper(l.Attrs().HardwareAddr.String())
}

// scapy sends frames from ns with /usr/bin/python3's scapy.
func scapy(t *testing.T, ns *netns.NS, script string) {
	t.Helper()
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import scapy").Run(); err != nil {
		t.Skip("scapy not installed (apt-get install python3-scapy)")
	}
	full := "import logging\nlogging.getLogger('scapy.runtime').setLevel(logging.ERROR)\nfrom scapy.all import *\nconf.verb=0\n" + script
	out, err := exec.Command("nsenter", "--net="+ns.Path(), "/usr/bin/python3", "-c", full).CombinedOutput()
	if err != nil {
		t.Fatalf("scapy: %v\n%s", err, out)
	}
}

// udpSink counts datagrams arriving in ns on port, by source.
type udpSink struct {
	mu   sync.Mutex
	from map[string]int
}

func sink(t *testing.T, ns *netns.NS, addr string) *udpSink {
	t.Helper()
	var pc net.PacketConn
	if err := ns.Do(func() (err error) { pc, err = net.ListenPacket("udp", addr); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	s := &udpSink{from: map[string]int{}}
	go func() {
		buf := make([]byte, 2048)
		for {
			_, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.from[a.(*net.UDPAddr).IP.String()]++
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *udpSink) got(src string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.from[src]
}

func antispoof(t *testing.T, env *testenv.Env) *api.AntispoofStatus {
	t.Helper()
	st, err := invoke(t, env, api.AntispoofGet, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// counters strips what changes between two listings of the same table.
var counters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// Anti-spoofing with real packets: on the enforced subscriber interface
// the registered pair passes, a forged source address, a forged MAC, a
// forged ARP reply and a rogue RA are dropped and logged with the sending
// MAC; dynamic mode passes a leased unregistered device; a deleted client
// no longer passes; the table lists the same after two syncs; disabling
// removes every rule and keeps the settings.
func TestAntispoofInKernel(t *testing.T) {
	tp := newTopo(t)
	env := testenv.Start(t)
	subMAC := macOf(t, tp.sub, "r-subp")
	const devMAC = "02:00:00:00:00:50"
	si := startStandIns(t, env)
	ipv6 := subAddr6
	si.clients = []api.Client{{MAC: subMAC, IP: subAddr, IPv6: &ipv6, Iface: "r-sub", Hostname: "sub5", Comment: "registered"}}
	start(t, env, tp.router, firewall.Deps{})
	up := sink(t, tp.up, ":9999")
	listen(t, tp.up, upAddr+":9000")

	// The override recorded while the feature is off.
	st, m := call(t, env, api.AntispoofIfaceOp, "POST", map[string]any{"iface": "r-sub", "mode": "strict"})
	if st != 200 || m["apply"].(map[string]any)["action"] != "feature off" || m["note"] == "" {
		t.Fatalf("override while off: %d %v", st, m)
	}
	if st, m = call(t, env, api.AntispoofIfaceOp, "POST", map[string]any{"iface": "nosuch0", "mode": "strict"}); st != 404 {
		t.Errorf("missing interface: %d %v", st, m)
	}
	if st, m = call(t, env, api.AntispoofIfaceOp, "POST", map[string]any{"iface": "r-sub", "mode": "loose"}); st != 400 || m["field"] != "mode" {
		t.Errorf("bad mode: %d %v", st, m)
	}
	if st, m = call(t, env, api.AntispoofSetOp, "POST", map[string]any{}); st != 400 {
		t.Errorf("nothing to set: %d %v", st, m)
	}
	if st, m = call(t, env, api.AntispoofSetOp, "POST", map[string]any{"exempt": "10.0.0.0/33"}); st != 400 || m["field"] != "exempt" {
		t.Errorf("bad exempt: %d %v", st, m)
	}
	st, m = call(t, env, api.AntispoofSetOp, "POST", map[string]any{"enabled": true, "log": true})
	if st != 200 || m["message"] != "enabled" {
		t.Fatalf("enable: %d %v", st, m)
	}
	testenv.WaitFor(t, 10*time.Second, "the client bound", func() bool {
		e := antispoof(t, env).Enforced["r-sub"]
		return e.Bindings4 == 1 && e.Bindings6 == 1 && e.Exists
	})

	// The registered pair passes, over TCP and UDP.
	if err := dial(tp.sub, upAddr+":9000", 2*time.Second); err != nil {
		t.Fatalf("registered pair: %v", err)
	}
	routerMAC := strings.ToLower(macOf(t, tp.router, "r-sub"))
	send := func(src, mac string) {
		scapy(t, tp.sub, fmt.Sprintf(`
sendp(Ether(src=%q, dst=%q)/IP(src=%q, dst=%q)/UDP(sport=5000, dport=9999)/b'x', iface='r-subp', count=3)
`, mac, routerMAC, src, upAddr))
	}
	send(subAddr, strings.ToLower(subMAC))
	testenv.WaitFor(t, 5*time.Second, "the registered pair's datagram upstream", func() bool { return up.got(subAddr) > 0 })

	// A forged source address, then a forged MAC with the registered address.
	send("10.0.0.9", strings.ToLower(subMAC))
	send(subAddr, "02:00:00:00:00:66")
	// A forged ARP reply claiming a neighbour's address, and a rogue RA.
	scapy(t, tp.sub, fmt.Sprintf(`
sendp(Ether(src=%[1]q, dst=%[2]q)/ARP(op=2, hwsrc=%[1]q, psrc='10.0.0.7', hwdst=%[2]q, pdst=%[3]q), iface='r-subp', count=2)
sendp(Ether(src=%[1]q, dst='33:33:00:00:00:01')/IPv6(src='fe80::5', dst='ff02::1')/ICMPv6ND_RA(), iface='r-subp', count=2)
`, strings.ToLower(subMAC), routerMAC, routerSub))
	time.Sleep(300 * time.Millisecond) // nothing to wait for: these must not arrive
	if n := up.got("10.0.0.9"); n != 0 {
		t.Errorf("forged source arrived upstream %d times", n)
	}
	e := antispoof(t, env).Enforced["r-sub"]
	if e.Dropped.IP4 < 6 || e.Dropped.ARP < 2 || e.Dropped.IP6 < 2 {
		t.Errorf("dropped = %+v, want ip4>=6 arp>=2 ip6>=2", e.Dropped)
	}
	if out := testenv.Run(t, tp.router, "ip", "neigh", "show", "10.0.0.7"); strings.Contains(out, "lladdr") {
		t.Errorf("the forged ARP reply reached the router's neighbour table: %s", out)
	}
	// Logged with the sending MAC.
	var lg *api.AntispoofLog
	testenv.WaitFor(t, 5*time.Second, "drops logged", func() bool {
		var err error
		lg, err = invoke(t, env, api.AntispoofLogGet, &api.AntispoofLogRequest{Since: "10m", Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]bool{}
		for _, e := range lg.Entries {
			kinds[e.Kind+"/"+e.Src+"/"+e.MAC+"/"+e.Proto+e.Op] = true
		}
		return kinds["ip/10.0.0.9/"+subMAC+"/UDP"] && kinds["ip/"+subAddr+"/02:00:00:00:00:66/UDP"] &&
			kinds["arp/10.0.0.7/"+subMAC+"/reply"] && kinds["ip/fe80::5/"+subMAC+"/ICMPv6/RA"]
	})
	if lg.Total < 4 || len(lg.Offenders) < 4 || lg.Offenders[0].Count < lg.Offenders[len(lg.Offenders)-1].Count {
		t.Errorf("log: total %d offenders %+v", lg.Total, lg.Offenders)
	}
	if one, _ := invoke(t, env, api.AntispoofLogGet, &api.AntispoofLogRequest{Since: "2h", Limit: 1}); len(one.Entries) != 1 || one.Total != lg.Total {
		t.Errorf("limit 1: %d entries, total %d", len(one.Entries), one.Total)
	}
	for _, since := range []string{"45s", "1d", time.Now().Add(-time.Hour).Format("2006-01-02 15:04")} {
		if st, m := call(t, env, api.AntispoofLogGet, "GET", map[string]any{"since": since}); st != 200 {
			t.Errorf("since %s: %d %v", since, st, m)
		}
	}
	if st, m := call(t, env, api.AntispoofLogGet, "GET", map[string]any{"since": "yesterday"}); st != 400 || m["field"] != "since" {
		t.Errorf("bad since: %d %v", st, m)
	}
	if st := antispoof(t, env); st.LastHour.Attempts < 4 || st.LastHour.Devices < 2 {
		t.Errorf("last_hour = %+v", st.LastHour)
	}
	rules, _ := invoke(t, env, api.FirewallGet, &api.FirewallViewRequest{})
	if rules.Count != 1 || rules.MACRules[0].MAC != subMAC || rules.MACRules[0].Client == nil || rules.MACRules[0].Client.Hostname != "sub5" {
		t.Errorf("GET /firewall = %+v", rules)
	}

	// Strict: a lease answered through option 82 (a fibre service's) binds.
	svcLease := api.Lease{Kind: "v4", Addr: netip.MustParseAddr("10.0.0.60"), Iface: "r-sub", MAC: "02:00:00:00:00:60", State: "bound", CircuitID: "0/1/1:5"}
	si.mu.Lock()
	si.leases = append(si.leases, svcLease)
	si.mu.Unlock()
	si.dhcp.Publish(event.LeaseGranted, nil, svcLease)
	testenv.WaitFor(t, 5*time.Second, "the service's lease bound", func() bool {
		e := antispoof(t, env).Enforced["r-sub"]
		return e.Bindings4 == 2 && e.Service == 1 && e.Clients == 1
	})

	// Dynamic: an unregistered device passes on the address DHCP leased it.
	send("10.0.0.50", devMAC)
	if st, m := call(t, env, api.AntispoofIfaceOp, "POST", map[string]any{"iface": "r-sub", "mode": "dynamic"}); st != 200 || m["effective"] != "dynamic" {
		t.Fatalf("dynamic: %d %v", st, m)
	}
	lease := api.Lease{Kind: "v4", Addr: netip.MustParseAddr("10.0.0.50"), Iface: "r-sub", MAC: devMAC, State: "bound"}
	si.mu.Lock()
	si.leases = append(si.leases, lease)
	si.mu.Unlock()
	si.dhcp.Publish(event.LeaseGranted, nil, lease)
	testenv.WaitFor(t, 5*time.Second, "the lease bound", func() bool {
		e := antispoof(t, env).Enforced["r-sub"]
		return e.Bindings4 == 3 && e.Leases == 1
	})
	if up.got("10.0.0.50") != 0 {
		t.Error("the unregistered device passed before its lease")
	}
	send("10.0.0.50", devMAC)
	testenv.WaitFor(t, 5*time.Second, "the leased device upstream", func() bool { return up.got("10.0.0.50") > 0 })

	// Applying twice lists the same table.
	strip := func(s string) string { return counters.ReplaceAllString(s, "counter") }
	call(t, env, api.AntispoofSyncOp, "POST", nil)
	first := strip(testenv.Run(t, tp.router, "nft", "list", "table", "netdev", "routerd_firewall_spoof"))
	if st, m := call(t, env, api.AntispoofSyncOp, "POST", nil); st != 200 || m["applied"] != true {
		t.Errorf("sync: %d %v", st, m)
	}
	if diff := cmp.Diff(first, strip(testenv.Run(t, tp.router, "nft", "list", "table", "netdev", "routerd_firewall_spoof"))); diff != "" {
		t.Errorf("second sync changed the table (-first +second):\n%s", diff)
	}

	// The client deleted: its pair no longer passes.
	si.mu.Lock()
	si.clients = nil
	si.mu.Unlock()
	si.subs.Publish(api.ClientDeleted, nil, api.Client{MAC: subMAC, IP: subAddr, IPv6: &ipv6, Iface: "r-sub"})
	testenv.WaitFor(t, 5*time.Second, "the client unbound", func() bool { return antispoof(t, env).Enforced["r-sub"].Bindings4 == 2 })
	if err := dial(tp.sub, upAddr+":9000", 500*time.Millisecond); err == nil {
		t.Error("a deleted client's pair still passes")
	}

	// Disabled: every rule removed, the settings kept.
	st, m = call(t, env, api.AntispoofSetOp, "POST", map[string]any{"enabled": "off"})
	if st != 200 || m["message"] != "disabled - rules removed" {
		t.Fatalf("disable: %d %v", st, m)
	}
	if out, _ := exec.Command("nsenter", "--net="+tp.router.Path(), "nft", "list", "tables").CombinedOutput(); strings.Contains(string(out), "routerd_firewall_spoof") {
		t.Errorf("table still there:\n%s", out)
	}
	if s := antispoof(t, env); s.Enabled || !s.Log || s.Overrides["r-sub"] != "dynamic" {
		t.Errorf("settings after disabling: %+v", s)
	}
	if err := dial(tp.sub, upAddr+":9000", 2*time.Second); err != nil {
		t.Errorf("with anti-spoofing off: %v", err)
	}
	if mode, _ := invoke(t, env, api.AntispoofModeGet, &api.None{}); mode.Mode != "off" {
		t.Errorf("mode = %v", mode)
	}
}
