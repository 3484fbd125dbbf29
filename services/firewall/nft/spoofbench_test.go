package nft_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/services/firewall/nft"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// benchTopo: sub -- r-sub [router] r-up -- up, forwarding 10.0.0.0/16 and
// 2001:db8:a::/48 to 192.0.2.0/24.
func benchTopo(b *testing.B) (router, sub, up *netns.NS, subMAC net.HardwareAddr) {
	router, sub, up = testenv.Netns(b), testenv.Netns(b), testenv.Netns(b)
	pair := func(a, z *netns.NS, name string, addrA, addrZ, gw string) net.HardwareAddr {
		nl, _ := a.Netlink()
		defer nl.Close()
		if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
			b.Skip(err)
		}
		peer, _ := nl.LinkByName(name + "p")
		if err := nl.LinkSetNsFd(peer, z.FD()); err != nil {
			b.Fatal(err)
		}
		nz, _ := z.Netlink()
		defer nz.Close()
		for _, x := range []struct {
			h    *netlink.Handle
			n, a string
		}{{nl, name, addrA}, {nz, name + "p", addrZ}} {
			l, _ := x.h.LinkByName(x.n)
			ad, _ := netlink.ParseAddr(x.a)
			ad.Flags = 0x02
			if err := x.h.AddrAdd(l, ad); err != nil {
				b.Fatal(err)
			}
			x.h.LinkSetUp(l)
		}
		testenv.Run(b, z, "ip", "route", "replace", "default", "via", gw)
		l, _ := nz.LinkByName(name + "p")
		return l.Attrs().HardwareAddr
	}
	subMAC = pair(router, sub, "r-sub", "10.0.0.1/16", "10.0.0.5/16", "10.0.0.1")
	pair(router, up, "r-up", "192.0.2.1/24", "192.0.2.2/24", "192.0.2.1")
	testenv.Run(b, router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return
}

// bindings makes n bindings on r-sub: two thirds IPv4 pairs, one third
// IPv6 /56 prefixes, each with its own MAC.
func bindings(n int) []nft.Binding {
	out := make([]nft.Binding, 0, n)
	for i := 0; i < n; i++ {
		mac := net.HardwareAddr{0x02, 0x10, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
		if i%3 == 2 {
			p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 16), byte(i >> 8), byte(i)}), 56)
			out = append(out, nft.Binding{Iface: "r-sub", MAC: mac, Prefix: p})
			continue
		}
		a := netip.AddrFrom4([4]byte{10, byte(1 + i>>16), byte(i >> 8), byte(i)})
		out = append(out, nft.Binding{Iface: "r-sub", MAC: mac, Prefix: netip.PrefixFrom(a, 32)})
	}
	return out
}

// flood sends UDP from sub to up for d and returns the packets per second
// received.
func flood(b *testing.B, sub, up *netns.NS, d time.Duration) float64 {
	var pc net.PacketConn
	if err := up.Do(func() (err error) { pc, err = net.ListenPacket("udp", "192.0.2.2:9999"); return }); err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	var c net.Conn
	if err := sub.Do(func() (err error) { c, err = net.Dial("udp", "192.0.2.2:9999"); return }); err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 18)
	time.Sleep(100 * time.Millisecond)
	start := got.Load()
	t0 := time.Now()
	for time.Since(t0) < d {
		for i := 0; i < 64; i++ {
			_, _ = c.Write(msg)
		}
	}
	time.Sleep(50 * time.Millisecond)
	n := got.Load() - start
	c.Close()
	pc.Close()
	<-done
	return float64(n) / d.Seconds()
}

// BenchmarkSpoofBindings: 100,000 bindings (IPv4 pairs and IPv6 /56
// prefixes) loaded in one transaction (the rebuild), one binding added or
// removed (time until the kernel acknowledged it, p50/p99), the same
// through `nft -f` and `nft add element`, and the packets per second a UDP
// flood gets through the router with anti-spoofing off, on with 1,000 and
// on with 100,000 bindings. ROUTERD_BENCH_BINDINGS changes the 100,000.
func BenchmarkSpoofBindings(b *testing.B) {
	n := 100000
	if v := os.Getenv("ROUTERD_BENCH_BINDINGS"); v != "" {
		fmt.Sscan(v, &n)
	}
	router, sub, up, subMAC := benchTopo(b)
	k, err := nft.OpenSpoof(router)
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	own := nft.Binding{Iface: "r-sub", MAC: subMAC, Prefix: netip.MustParsePrefix("10.0.0.5/32")}
	all := append(bindings(n), own)
	state := func(bs []nft.Binding) nft.SpoofState {
		return nft.SpoofState{Ifaces: []string{"r-sub"}, Bindings: bs, LogGroup: 77}
	}

	// The rebuild of n bindings.
	t0 := time.Now()
	if err := k.Rebuild(state(all)); err != nil {
		b.Fatal(err)
	}
	rebuild := time.Since(t0)
	n4, n6, _ := k.Count()
	if n4+n6 != n+1 {
		out, _ := exec.Command("sh", "-c", "nsenter --net="+router.Path()+" nft list set netdev "+nft.SpoofTable+" bind6 | grep -o 2001 | wc -l").CombinedOutput()
		b.Fatalf("kernel holds %d+%d bindings, want %d (nft lists %s IPv6)", n4, n6, n+1, out)
	}

	// One binding changed at a time, with n loaded.
	extra := bindings(n + 400)[n:]
	var lat []time.Duration
	for _, x := range extra {
		t := time.Now()
		if err := k.Change(func(bt *nft.SpoofBatch) { bt.Bind(x) }); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
		t = time.Now()
		if err := k.Change(func(bt *nft.SpoofBatch) { bt.Unbind(x) }); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]

	// The same with the nft command: the whole set from a file, and one
	// element per exec.
	var sb strings.Builder
	sb.WriteString("flush set netdev " + nft.SpoofTable + " bind4\nflush set netdev " + nft.SpoofTable + " bind6\n")
	for _, x := range all {
		set := "bind4"
		if x.Prefix.Addr().Is6() {
			set = "bind6"
		}
		addr := x.Prefix.String()
		if x.Prefix.Addr().Is4() {
			addr = x.Prefix.Addr().String()
		}
		fmt.Fprintf(&sb, "add element netdev %s %s { \"%s\" . %s . %s }\n", nft.SpoofTable, set, x.Iface, x.MAC, addr)
	}
	file := filepath.Join(b.TempDir(), "bindings.nft")
	os.WriteFile(file, []byte(sb.String()), 0o600)
	t0 = time.Now()
	if out, err := exec.Command("nsenter", "--net="+router.Path(), "nft", "-f", file).CombinedOutput(); err != nil {
		b.Fatalf("nft -f: %v %s", err, out)
	}
	nftFile := time.Since(t0)
	var execLat []time.Duration
	for _, x := range extra[:50] {
		t := time.Now()
		if out, err := exec.Command("nsenter", "--net="+router.Path(), "nft", "add", "element", "netdev", nft.SpoofTable, "bind4",
			fmt.Sprintf("{ \"%s\" . %s . %s }", x.Iface, x.MAC, x.Prefix.Addr())).CombinedOutput(); err != nil && x.Prefix.Addr().Is4() {
			b.Fatalf("nft add element: %v %s", err, out)
		}
		execLat = append(execLat, time.Since(t))
	}
	sort.Slice(execLat, func(i, j int) bool { return execLat[i] < execLat[j] })

	// Forwarding: off, 1,000, n; three rounds, the median of each.
	d := 2 * time.Second
	rates := map[string][]float64{}
	for round := 0; round < 3; round++ {
		if err := k.Remove(); err != nil {
			b.Fatal(err)
		}
		rates["off"] = append(rates["off"], flood(b, sub, up, d))
		if err := k.Rebuild(state(append(bindings(1000), own))); err != nil {
			b.Fatal(err)
		}
		rates["1k"] = append(rates["1k"], flood(b, sub, up, d))
		if err := k.Rebuild(state(all)); err != nil {
			b.Fatal(err)
		}
		rates["n"] = append(rates["n"], flood(b, sub, up, d))
	}
	med := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	b.ReportMetric(float64(rebuild.Milliseconds()), "rebuild-ms")
	b.ReportMetric(float64(p50.Microseconds()), "change-p50-us")
	b.ReportMetric(float64(p99.Microseconds()), "change-p99-us")
	b.ReportMetric(float64(nftFile.Milliseconds()), "nft-f-ms")
	b.ReportMetric(float64(execLat[len(execLat)/2].Microseconds()), "nft-exec-p50-us")
	b.ReportMetric(med(rates["off"]), "pps-off")
	b.ReportMetric(med(rates["1k"]), "pps-1k")
	b.ReportMetric(med(rates["n"]), "pps-n")
	b.Logf("%d bindings: rebuild %v; one change p50 %v p99 %v; nft -f of the same %v, nft add element p50 %v; pps off %.0f, 1,000 %.0f, %d %.0f (all rounds %v)",
		n, rebuild, p50, p99, nftFile, execLat[len(execLat)/2], med(rates["off"]), med(rates["1k"]), n, med(rates["n"]), rates)
	if err := k.Remove(); err != nil {
		b.Fatal(err)
	}
}
