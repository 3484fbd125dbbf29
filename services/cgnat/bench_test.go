package cgnat_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/cgnat/nft"
	"routerd.dev/services/cgnat/slot"
	"routerd.dev/shared/testenv"
)

// benchN is the number of subscribers (ROUTERD_BENCH_CGNAT, default 100,000).
func benchN() int {
	if n, err := strconv.Atoi(os.Getenv("ROUTERD_BENCH_CGNAT")); err == nil && n > 0 {
		return n
	}
	return 100000
}

// private is the n-th subscriber's address: 10.0.0.0/8 from 10.0.1.0 on.
func private(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte((i + 256) >> 16), byte((i + 256) >> 8), byte(i + 256)})
}

func benchElems(b testing.TB, n int) ([]nft.Element, *slot.Plan) {
	addrs, _ := slot.ParsePool([]string{"100.64.0.0/22"})
	plan, err := slot.New(addrs, 1024, 65535, 512)
	if err != nil {
		b.Fatal(err)
	}
	if n > plan.Capacity() {
		b.Fatalf("%d subscribers on a /22 at blocks of 512: capacity %d", n, plan.Capacity())
	}
	out := make([]nft.Element, n)
	for i := range out {
		m, _ := plan.Slot(i)
		out[i] = nft.Element{Private: private(i), Public: m.Public, PortStart: uint16(m.PortStart), PortEnd: uint16(m.PortEnd)}
	}
	return out, plan
}

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

// BenchmarkCGNATMap: 100,000 subscribers on a /22 pool (blocks of 512, 126
// an address): the map built in one transaction against `nft -f` doing
// the same (nft's own interval map, what a script would write), then one
// subscriber added to the full map (p50/p99 to the kernel), and the
// in-process lookup. Run: go test -run X -bench CGNATMap -benchtime 1x.
func BenchmarkCGNATMap(b *testing.B) {
	n := benchN()
	elems, plan := benchElems(b, n)
	ns := testenv.Netns(b)
	k := nft.New(ns.FD(), ns.Path())
	rules := []nft.Rule{
		{Chain: nft.ChainPost, ID: "cgnat exempt up0", Exprs: nft.Join(nft.OifName("up0"), k.ExemptLookup(), nft.Accept())},
		{Chain: nft.ChainPost, ID: "cgnat tcp up0", Exprs: nft.Join(nft.OifName("up0"), nft.L4(6), k.SNATMap())},
		{Chain: nft.ChainPost, ID: "cgnat udp up0", Exprs: nft.Join(nft.OifName("up0"), nft.L4(17), k.SNATMap())},
		{Chain: nft.ChainPost, ID: "cgnat icmp up0", Exprs: nft.Join(nft.OifName("up0"), nft.L4(1), k.SNATMap())},
	}
	t0 := time.Now()
	if err := k.Create(rules, nil, elems); err != nil {
		b.Fatal(err)
	}
	build := time.Since(t0)
	st, err := k.Read()
	if err != nil || len(st.Elems) != n {
		b.Fatalf("read back %d elements: %v", len(st.Elems), err)
	}

	// nft -f with the same table in a fresh namespace.
	var sb strings.Builder
	sb.WriteString("table ip routerd_cgnat {\n map cg_subs { type ipv4_addr : interval ipv4_addr . inet_service; flags interval; elements = {\n")
	for i, e := range elems {
		if i > 0 {
			sb.WriteString(",\n")
		}
		fmt.Fprintf(&sb, "%s : %s . %d-%d", e.Private, e.Public, e.PortStart, e.PortEnd)
	}
	sb.WriteString("}\n }\n chain postrouting { type nat hook postrouting priority srcnat; policy accept;\n")
	for _, p := range []string{"tcp", "udp", "icmp"} {
		fmt.Fprintf(&sb, "  oifname \"up0\" meta l4proto %s snat ip to ip saddr map @cg_subs\n", p)
	}
	sb.WriteString(" }\n}\n")
	file := filepath.Join(b.TempDir(), "cgnat.nft")
	if err := os.WriteFile(file, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	ns2 := testenv.Netns(b)
	t0 = time.Now()
	if out, err := exec.Command("nsenter", "--net="+ns2.Path(), "nft", "-f", file).CombinedOutput(); err != nil {
		b.Fatalf("nft -f: %v\n%s", err, out)
	}
	nftBuild := time.Since(t0)

	// One subscriber added to the full map: one element, one transaction.
	const adds = 500
	var lat []time.Duration
	extra, _ := benchElems(b, min(n+adds, plan.Capacity()))
	for _, e := range extra[n:] {
		t0 := time.Now()
		if err := k.Apply(nft.Batch{AddElems: []nft.Element{e}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	// The in-process lookup: the slot formula's inverse.
	pub := netip.MustParseAddr("100.64.2.17")
	const lookups = 1000000
	t0 = time.Now()
	for i := 0; i < lookups; i++ {
		plan.Lookup(pub, 1024+i%64000)
	}
	lookup := time.Since(t0) / lookups

	b.ReportMetric(build.Seconds(), "build_s")
	b.ReportMetric(nftBuild.Seconds(), "nft_f_s")
	b.ReportMetric(float64(pct(lat, 0.5).Microseconds()), "add_p50_us")
	b.ReportMetric(float64(pct(lat, 0.99).Microseconds()), "add_p99_us")
	b.ReportMetric(float64(lookup.Nanoseconds()), "lookup_ns")
	b.Logf("%d subscribers: map build %v (nft -f %v, %.2fx); one addition p50 %v p99 %v; in-process lookup %v",
		n, build.Round(time.Millisecond), nftBuild.Round(time.Millisecond), build.Seconds()/nftBuild.Seconds(),
		pct(lat, 0.5), pct(lat, 0.99), lookup)
}

// TestBenchCGNATService: the service with 100,000 subscribers (given in
// one SyncClients, stored in etcd in transactions of 100): the sync, one
// subscriber added through the domain method (etcd + kernel) p50/p99, the
// reconcile of an unchanged kernel, the lookup in-process (LookupLocal,
// the mutex included) and through the gateway. A test, not a benchmark,
// because the rig is built on *testing.T; it runs only with
// ROUTERD_BENCH_CGNAT set.
func TestBenchCGNATService(t *testing.T) {
	if os.Getenv("ROUTERD_BENCH_CGNAT") == "" {
		t.Skip("benchmark: set ROUTERD_BENCH_CGNAT=100000")
	}
	n := benchN()
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	r := newRig(t, ns)
	r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": true, "iface": "up0", "pool": "100.64.0.0/22", "block_size": 512})
	clients := make([]api.Client, n)
	for i := range clients {
		clients[i] = api.Client{MAC: fmt.Sprintf("02:00:%02X:%02X:%02X:%02X", byte(i>>24), byte(i>>16), byte(i>>8), byte(i)), IP: private(i).String()}
	}
	ctx := context.Background()
	t0 := time.Now()
	if err := r.svc.SyncClients(ctx, clients); err != nil {
		t.Fatal(err)
	}
	sync := time.Since(t0)
	var lat []time.Duration
	for i := 0; i < 300; i++ {
		c := api.Client{MAC: fmt.Sprintf("04:00:00:00:%02X:%02X", byte(i>>8), byte(i)), IP: private(n + i).String()}
		t0 := time.Now()
		if err := r.svc.UpsertClient(ctx, c); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	t0 = time.Now()
	changes, err := r.svc.Reconcile(ctx)
	if err != nil || changes != 0 {
		t.Fatalf("reconcile of an unchanged kernel: %d changes, %v", changes, err)
	}
	reconcile := time.Since(t0)
	pub := netip.MustParseAddr("100.64.1.7")
	const lookups = 200000
	t0 = time.Now()
	for i := 0; i < lookups; i++ {
		r.svc.LookupLocal(pub, 1024+i%64000)
	}
	local := time.Since(t0) / lookups
	var api []time.Duration
	for i := 0; i < 300; i++ {
		t0 := time.Now()
		m := r.want(t, 200, "GET", "/cgnat/lookup"+q("public_ip", "100.64.1.7", "port", strconv.Itoa(1024+(i%90)*512+i%512)), nil)
		api = append(api, time.Since(t0))
		if m["found"] != true {
			t.Fatalf("lookup: %v", m)
		}
	}
	t.Logf("%d subscribers: sync (store + map) %v; one subscriber added (etcd + kernel) p50 %v p99 %v; unchanged reconcile %v; lookup in-process %v, through the gateway p50 %v p99 %v",
		n, sync.Round(time.Millisecond), pct(lat, 0.5), pct(lat, 0.99), reconcile.Round(time.Millisecond), local, pct(api, 0.5), pct(api, 0.99))
}

// TestBenchCGNATForwarding: packets per second forwarded through the
// router namespace with CGNAT on, each packet a new flow (a new conntrack
// entry, so a map lookup and a port choice inside the block), at 1,000 and
// at ROUTERD_BENCH_CGNAT mapped subscribers. The uplink's eth0 counts what
// arrives (its input drops it). Bounded: 20,000 packets a run, five runs
// each, the median kept. Runs only with ROUTERD_BENCH_CGNAT set.
func TestBenchCGNATForwarding(t *testing.T) {
	if os.Getenv("ROUTERD_BENCH_CGNAT") == "" {
		t.Skip("benchmark: set ROUTERD_BENCH_CGNAT=100000")
	}
	n := benchN()
	l := newLab(t)
	r := newRig(t, l.router)
	r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": true, "iface": "up0", "pool": "100.64.0.0/22", "block_size": 512})
	testenv.Run(t, l.up, "nft", "add table ip sink; add chain ip sink in { type filter hook input priority 0; policy accept; }; add rule ip sink in udp dport 10000-65000 drop")
	var sc *net.UDPConn
	if err := l.sub.Do(func() error {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("10.77.0.50")})
		sc = c
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	upl, err := l.up.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer upl.Close()
	rx := func() uint64 {
		link, err := upl.LinkByName("up0p")
		if err != nil {
			t.Fatal(err)
		}
		return link.Attrs().Statistics.RxPackets
	}
	const packets = 20000
	flood := func() (float64, int) {
		testenv.Run(t, l.router, "conntrack", "-F")
		before := rx()
		msg := []byte("x")
		t0 := time.Now()
		for i := 0; i < packets; i++ {
			sc.WriteToUDP(msg, &net.UDPAddr{IP: net.ParseIP("198.18.0.1"), Port: 10000 + i})
		}
		last, lastAt := rx(), time.Now()
		for time.Since(lastAt) < 100*time.Millisecond {
			time.Sleep(5 * time.Millisecond)
			if v := rx(); v != last {
				last, lastAt = v, time.Now()
			}
		}
		got := int(last - before)
		return float64(got) / lastAt.Sub(t0).Seconds(), got
	}
	measure := func(subs int) (float64, int) {
		clients := make([]api.Client, subs)
		clients[0] = api.Client{MAC: "02:00:00:00:00:50", IP: "10.77.0.50"}
		for i := 1; i < subs; i++ {
			clients[i] = api.Client{MAC: fmt.Sprintf("02:01:%02X:%02X:%02X:%02X", byte(i>>24), byte(i>>16), byte(i>>8), byte(i)), IP: private(i).String()}
		}
		if err := r.svc.SyncClients(context.Background(), clients); err != nil {
			t.Fatal(err)
		}
		var rates []float64
		got := 0
		for i := 0; i < 5; i++ {
			pps, k := flood()
			rates = append(rates, pps)
			got += k
		}
		// The flows were translated: the subscriber's slot 0 is 100.64.0.0.
		if ct := testenv.Run(t, l.router, "conntrack", "-L", "-p", "udp", "-s", "10.77.0.50"); !strings.Contains(ct, "dst=100.64.0.0 ") {
			t.Fatalf("flows not translated:\n%.600s", ct)
		}
		sort.Float64s(rates)
		return rates[2], got
	}
	small, got1 := measure(1000)
	big, got2 := measure(n)
	t.Logf("forwarding with CGNAT on, a new flow a packet: %.0f pps at 1,000 subscribers (%d of %d arrived), %.0f pps at %d (%d of %d): %.1f%% of the first",
		small, got1, 5*packets, big, n, got2, 5*packets, 100*big/small)
}
