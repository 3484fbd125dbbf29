package shaper_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	"routerd.dev/services/shaper"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// BenchmarkShaper measures the shaper at each size of ROUTERD_BENCH_SHAPER
// (comma-separated; default 1000; `make bench-shaper` runs 1000,100000):
// the full build at start against the same classes built by `tc -batch`
// (and the maps, elements and limit objects by `nft -f`) in another
// namespace in the same run; one subscriber's set (new, rate change) and removal
// p50/p99 through the bus; reshaping the plan of up to 10,000; the
// reconcile at a restart with everything in place. ROUTERD_BENCH_SHAPER_NO_TC
// set leaves the tc -batch build out. Subscribers are spread
// over /16s of 25,000 on up to four interfaces (so one interface holds a
// flat /16 of 25,000), 250 per /24. Run with -benchtime 1x.
func BenchmarkShaper(b *testing.B) {
	sizes := []int{1000}
	if v := os.Getenv("ROUTERD_BENCH_SHAPER"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("ROUTERD_BENCH_SHAPER: %q", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchSize(b, n)
			}
		})
	}
}

const perIface = 25000

func benchShapes(n int) ([]api.Shape, int) {
	ifaces := (n + perIface - 1) / perIface
	out := make([]api.Shape, n)
	for i := range out {
		j, k := i/perIface, i%perIface
		plan := "base"
		if i < 10000 {
			plan = "p10k"
		}
		out[i] = api.Shape{
			ID: fmt.Sprintf("s%06d", i), IP: fmt.Sprintf("10.%d.%d.%d", 100+j, k/250, k%250+1),
			Prefix6: fmt.Sprintf("2001:db8:%x:%x::/64", j, k),
			Iface:   fmt.Sprintf("b%d", j), Plan: plan, DownMbps: 20, UpMbps: 10,
		}
	}
	return out, ifaces
}

// benchLinks gives ns the interfaces b0..b<k-1> (veth, the peers staying
// in ns).
func benchLinks(b *testing.B, ns *netns.NS, k int) {
	nl, err := ns.Netlink()
	if err != nil {
		b.Fatal(err)
	}
	defer nl.Close()
	for j := 0; j < k; j++ {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("b%d", j)}, PeerName: fmt.Sprintf("b%dp", j)}
		if err := nl.LinkAdd(v); err != nil {
			b.Skipf("kernel benchmark: veth: %v", err)
		}
		for _, name := range []string{v.Name, v.PeerName} {
			l, _ := nl.LinkByName(name)
			_ = nl.LinkSetUp(l)
		}
	}
}

type svcRun struct {
	svc    *shaper.Service
	cancel context.CancelFunc
	done   chan error
}

func startBench(b *testing.B, env *testenv.Env, ns *netns.NS) (*svcRun, time.Duration) {
	svc, err := shaper.New(shaper.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: testenv.Log(b)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &svcRun{svc: svc, cancel: cancel, done: make(chan error, 1)}
	t0 := time.Now()
	go func() { r.done <- svc.Run(ctx) }()
	for {
		_, err := bus.Invoke(context.Background(), env.NC, api.ShaperStatus, &api.None{})
		if err == nil {
			return r, time.Since(t0)
		}
		select {
		case err := <-r.done:
			b.Fatalf("shaper stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Since(t0) > time.Hour {
			b.Fatal("shaper not serving after an hour")
		}
	}
}

func (r *svcRun) stop(b *testing.B) {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		b.Fatal("shaper did not stop")
	}
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func benchSize(b *testing.B, n int) {
	ctx := context.Background()
	shapes, ifaces := benchShapes(n)
	env := testenv.Start(b)
	ns := testenv.Netns(b)
	benchLinks(b, ns, ifaces)
	t0 := time.Now()
	if err := shaper.Seed(ctx, env.KV, shapes); err != nil {
		b.Fatal(err)
	}
	seed := time.Since(t0)

	// The shaper's full build at start (the near-limit is built last,
	// in a namespace of its own, once the shaper's objects are gone).
	run, build := startBench(b, env, ns)
	b.Logf("n=%d: stored in %v; full build at start %v", n, seed.Round(time.Millisecond), build.Round(time.Millisecond))

	sp := run.svc.Spares()["b0"]
	b.Logf("n=%d: spare classes on b0 after the build: %d (target %d)", n, sp[0], sp[1])

	// One subscriber at a time, back to back: new ones (each with a /64),
	// each noted as taking a spare class or making one (the pool empty);
	// the pool refilled by the idle tending, timed; a second burst past the
	// pool, timing the adds that had to make their class; then rate
	// changes (down and up: the class and the limit object), then removals
	// (the classes become spares).
	const k = 200
	var add, addSpare, addMade, made2, change, remove []time.Duration
	newShape := func(i int) api.Shape {
		return api.Shape{ID: fmt.Sprintf("new%03d", i), IP: fmt.Sprintf("10.99.%d.%d", i/250, i%250+1), Prefix6: fmt.Sprintf("2001:db8:99:%x::/64", i),
			Iface: "b0", Plan: "base", DownMbps: 30, UpMbps: 15}
	}
	for i := 0; i < k; i++ {
		s := newShape(i)
		spare := run.svc.Spares()["b0"][0] > 0
		t := time.Now()
		if _, err := bus.Invoke(ctx, env.NC, api.ShaperSet, &s); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t)
		add = append(add, d)
		if spare {
			addSpare = append(addSpare, d)
		} else {
			addMade = append(addMade, d)
		}
	}
	t0 = time.Now()
	for sp := run.svc.Spares()["b0"]; sp[0] < sp[1]; sp = run.svc.Spares()["b0"] {
		if time.Since(t0) > 10*time.Minute {
			b.Fatalf("pool not refilled after 10 minutes: %v", sp)
		}
		time.Sleep(10 * time.Millisecond)
	}
	refill := time.Since(t0)
	sp = run.svc.Spares()["b0"]
	made := k
	for i := 0; i < sp[0]+20; i++ {
		s := newShape(made)
		made++
		spare := run.svc.Spares()["b0"][0] > 0
		t := time.Now()
		if _, err := bus.Invoke(ctx, env.NC, api.ShaperSet, &s); err != nil {
			b.Fatal(err)
		}
		if !spare {
			made2 = append(made2, time.Since(t))
		}
	}
	for i := 0; i < k; i++ {
		s := shapes[(i*7919)%n]
		s.DownMbps, s.UpMbps = 40, 20
		t := time.Now()
		if _, err := bus.Invoke(ctx, env.NC, api.ShaperSet, &s); err != nil {
			b.Fatal(err)
		}
		change = append(change, time.Since(t))
	}
	for i := 0; i < made; i++ {
		t := time.Now()
		if _, err := bus.Invoke(ctx, env.NC, api.ShaperRemove, &api.ShapeRef{ID: fmt.Sprintf("new%03d", i)}); err != nil {
			b.Fatal(err)
		}
		remove = append(remove, time.Since(t))
	}
	b.Logf("n=%d: one subscriber through the bus: new p50 %.2f ms p99 %.2f ms; rate change p50 %.2f ms p99 %.2f ms; removal p50 %.2f ms p99 %.2f ms",
		n, ms(pct(add, .5)), ms(pct(add, .99)), ms(pct(change, .5)), ms(pct(change, .99)), ms(pct(remove, .5)), ms(pct(remove, .99)))
	line := func(what string, d []time.Duration) string {
		if len(d) == 0 {
			return what + ": none"
		}
		return fmt.Sprintf("%s: %d, p50 %.2f ms p99 %.2f ms", what, len(d), ms(pct(d, .5)), ms(pct(d, .99)))
	}
	b.Logf("n=%d: of the %d new: %s; %s; pool refilled to %d by the idle tending in %v; a burst past the pool: %s",
		n, k, line("with a spare", addSpare), line("class made (pool empty)", addMade), sp[1], refill.Round(time.Millisecond),
		line("class made (pool empty)", made2))
	b.ReportMetric(ms(pct(add, .5)), "set-p50-ms")
	b.ReportMetric(ms(pct(add, .99)), "set-p99-ms")

	t0 = time.Now()
	pa, err := bus.Invoke(ctx, env.NC, api.ShaperPlan, &api.PlanRates{Plan: "p10k", DownMbps: 100, UpMbps: 50})
	if err != nil {
		b.Fatal(err)
	}
	reshape := time.Since(t0)
	b.Logf("n=%d: plan reshaped for %d subscribers in %v (target 2 s for 10,000: ratio %.2f)", n, pa.Reshaped, reshape.Round(time.Millisecond),
		reshape.Seconds()/2*10000/float64(pa.Reshaped))
	b.ReportMetric(reshape.Seconds(), "reshape-s")

	run.stop(b)
	run, restart := startBench(b, env, ns)
	run.stop(b)
	b.Logf("n=%d: reconcile at a restart with the kernel in place: %v (target 10 s: ratio %.2f)", n, restart.Round(time.Millisecond), restart.Seconds()/10)

	// The near-limit last, once the shaper's objects are gone: every
	// class in the system slows the creation of the next, whoever made it.
	var tcTime, nftTime time.Duration
	if os.Getenv("ROUTERD_BENCH_SHAPER_NO_TC") == "" {
		dropLinks(b, ns, ifaces)
		tcTime, nftTime = tcBatch(b, shapes, ifaces)
		b.Logf("n=%d: the same classes and nested qdiscs by tc -batch %v, the same maps, elements and limit objects by nft -f %v: full build ratio routerd/near-limit %.2f",
			n, tcTime.Round(time.Millisecond), nftTime.Round(time.Millisecond), build.Seconds()/(tcTime+nftTime).Seconds())
	}
	b.ReportMetric(build.Seconds(), "build-s")
	b.ReportMetric((tcTime + nftTime).Seconds(), "tc-batch-s")
	b.ReportMetric(restart.Seconds(), "restart-s")
}

// tcBatch builds what the shaper builds for shapes (roots, groups with
// their nested HTB, subscriber classes) with one `tc -batch` file, and the
// maps, their elements and the limit objects with one `nft -f` file, in a
// fresh namespace; it returns both times.
func tcBatch(b *testing.B, shapes []api.Shape, ifaces int) (time.Duration, time.Duration) {
	ns := testenv.Netns(b)
	benchLinks(b, ns, ifaces)
	var tc, nft, elems strings.Builder
	nft.WriteString("table inet bench {\n map down4 { type ipv4_addr : classid; }\n map down6_64 { type ipv6_addr : classid; }\n" +
		" map up4 { type ipv4_addr : limit; }\n map up6_64 { type ipv6_addr : limit; }\n")
	for j := 0; j < ifaces; j++ {
		dev := fmt.Sprintf("b%d", j)
		fmt.Fprintf(&tc, "qdisc add dev %s root handle 7264: htb default 0\n", dev)
		groups := map[string]int{}
		var down4, down6, up4, up6 []string
		for _, s := range shapes {
			if s.Iface != dev {
				continue
			}
			parts := strings.Split(s.IP, ".")
			net24 := strings.Join(parts[:3], ".")
			o4, _ := strconv.Atoi(parts[3])
			g, ok := groups[net24]
			if !ok {
				g = len(groups) + 1
				groups[net24] = g
				fmt.Fprintf(&tc, "class add dev %s parent 7264: classid 7264:%x htb rate 100gbit ceil 100gbit quantum 200000\n", dev, g)
				fmt.Fprintf(&tc, "qdisc add dev %s parent 7264:%x handle %x: htb default 0\n", dev, g, g)
			}
			m := o4 + 1
			fmt.Fprintf(&tc, "class add dev %s parent %x: classid %x:%x htb rate %dmbit ceil %dmbit quantum %d\n", dev, g, g, m, s.DownMbps, s.DownMbps, max(1600, min(200000, s.DownMbps*12500)))
			obj := fmt.Sprintf("\"up-%s\"", s.IP)
			fmt.Fprintf(&nft, " limit up-%s { rate over %d bytes/second }\n", s.IP, s.UpMbps*125000)
			down4 = append(down4, fmt.Sprintf("%s : %x:%x", s.IP, g, m))
			up4 = append(up4, fmt.Sprintf("%s : %s", s.IP, obj))
			if s.Prefix6 != "" { // every one a /64: its masked address in the /64 maps
				k := netip.MustParsePrefix(s.Prefix6).Masked().Addr()
				down6 = append(down6, fmt.Sprintf("%s : %x:%x", k, g, m))
				up6 = append(up6, fmt.Sprintf("%s : %s", k, obj))
			}
		}
		for _, x := range []struct {
			set string
			els []string
		}{{"down4", down4}, {"down6_64", down6}, {"up4", up4}, {"up6_64", up6}} {
			for els := x.els; len(els) > 0; {
				c := min(5000, len(els))
				fmt.Fprintf(&elems, "add element inet bench %s { %s }\n", x.set, strings.Join(els[:c], ", "))
				els = els[c:]
			}
		}
	}
	nft.WriteString("}\n")
	nft.WriteString(elems.String())
	dir := b.TempDir()
	tcFile, nftFile := filepath.Join(dir, "tc.batch"), filepath.Join(dir, "nft.rules")
	if err := os.WriteFile(tcFile, []byte(tc.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(nftFile, []byte(nft.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	timed := func(name string, args ...string) time.Duration {
		t := time.Now()
		out, err := exec.Command("nsenter", append([]string{"--net=" + ns.Path(), name}, args...)...).CombinedOutput()
		if err != nil {
			b.Fatalf("%s: %v\n%.2000s", name, err, out)
		}
		return time.Since(t)
	}
	tcTime, nftTime := timed("tc", "-force", "-batch", tcFile), timed("nft", "-f", nftFile)
	dropLinks(b, ns, ifaces)
	return tcTime, nftTime
}

// dropLinks deletes the benchmark's links (and so their classes).
func dropLinks(b *testing.B, ns *netns.NS, ifaces int) {
	nl, err := ns.Netlink()
	if err != nil {
		b.Fatal(err)
	}
	defer nl.Close()
	for j := 0; j < ifaces; j++ {
		if l, err := nl.LinkByName(fmt.Sprintf("b%d", j)); err == nil {
			_ = nl.LinkDel(l)
		}
	}
}
