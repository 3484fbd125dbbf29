package shaper_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/shaper"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// BenchmarkCounters measures one full sweep of counters.page at each size
// of ROUTERD_BENCH_COUNTERS (comma-separated; default 1000), the
// subscribers laid out as BenchmarkShaper's (each with a /64), in pages
// of 10,000 through the bus, each sweep reading the kernel afresh (one
// class dump per interface, one qdisc dump, one dump per count set),
// against the near-limit doing the same reading in the same namespace in
// the same run: `tc -s class show dev X` per interface and `nft list set`
// of each count set, their output read whole. Three rounds of each,
// alternating; the medians are compared. Run with -benchtime 1x.
func BenchmarkCounters(b *testing.B) {
	sizes := []int{1000}
	if v := os.Getenv("ROUTERD_BENCH_COUNTERS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("ROUTERD_BENCH_COUNTERS: %q", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchCounters(b, n)
			}
		})
	}
}

func benchCounters(b *testing.B, n int) {
	ctx := context.Background()
	shapes, ifaces := benchShapes(n)
	env := testenv.Start(b)
	ns := testenv.Netns(b)
	benchLinks(b, ns, ifaces)
	if err := shaper.Seed(ctx, env.KV, shapes); err != nil {
		b.Fatal(err)
	}
	run, build := startBench(b, env, ns)
	defer func() { run.stop(b) }()
	b.Logf("n=%d: full build at start %v", n, build.Round(time.Millisecond))

	sweepOnce := func() (time.Duration, time.Duration, int, int) {
		t0 := time.Now()
		var first time.Duration
		after, seen, pages := "", 0, 0
		for {
			p, err := bus.Invoke(ctx, env.NC, api.ShaperCounters, &api.ShapePageRequest{After: after, Limit: 10000})
			if err != nil {
				b.Fatal(err)
			}
			if pages == 0 {
				first = time.Since(t0)
			}
			pages++
			seen += p.Count
			if p.Next == "" {
				break
			}
			after = p.Next
		}
		return time.Since(t0), first, seen, pages
	}
	// The second near-limit for tc: one `tc -s -batch` of a class show
	// per group (parent G:), what the shaper's read asks the kernel.
	var groupBatch strings.Builder
	for j := 0; j < ifaces; j++ {
		dev := fmt.Sprintf("b%d", j)
		out := testenv.Run(b, ns, "tc", "class", "show", "dev", dev, "parent", "7264:")
		for _, f := range strings.Fields(out) {
			if g, ok := strings.CutPrefix(f, "7264:"); ok && g != "" {
				fmt.Fprintf(&groupBatch, "class show dev %s parent %s:\n", dev, g)
			}
		}
	}
	batchFile := filepath.Join(b.TempDir(), "groups.batch")
	if err := os.WriteFile(batchFile, []byte(groupBatch.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	nearLimit := func() (time.Duration, int) {
		t0 := time.Now()
		lines := 0
		for j := 0; j < ifaces; j++ {
			lines += countLines(b, ns, "tc", "-s", "class", "show", "dev", fmt.Sprintf("b%d", j))
		}
		for _, set := range []string{"cnt4", "cnt6_64"} {
			lines += countLines(b, ns, "nft", "list", "set", "inet", "routerd_shaper", set)
		}
		return time.Since(t0), lines
	}
	var ours, firsts, near, near2 []time.Duration
	for round := 0; round < 3; round++ {
		// Past the first page's reuse of a snapshot: every sweep reads
		// the kernel.
		time.Sleep(1100 * time.Millisecond)
		d, first, seen, pages := sweepOnce()
		if seen != n {
			b.Fatalf("a sweep saw %d subscribers of %d", seen, n)
		}
		ours, firsts = append(ours, d), append(firsts, first)
		nd, lines := nearLimit()
		near = append(near, nd)
		t0 := time.Now()
		glines := countLines(b, ns, "tc", "-s", "-batch", batchFile)
		gd := time.Since(t0)
		near2 = append(near2, gd)
		b.Logf("n=%d round %d: counters.page sweep %v (%d pages; the first, which reads the kernel, %v); tc -s class show + nft list set %v (%d lines); tc -s -batch of a class show per group %v (%d lines)",
			n, round+1, d.Round(time.Microsecond), pages, first.Round(time.Microsecond), nd.Round(time.Microsecond), lines, gd.Round(time.Microsecond), glines)
	}
	o, f, l, g := pct(ours, .5), pct(firsts, .5), pct(near, .5), pct(near2, .5)
	b.Logf("n=%d: median sweep %v (first page %v), near-limit %v: ratio routerd/near-limit %.2f; tc -s -batch per group alone %v", n,
		o.Round(time.Microsecond), f.Round(time.Microsecond), l.Round(time.Microsecond), o.Seconds()/l.Seconds(), g.Round(time.Microsecond))
	b.ReportMetric(o.Seconds()*1000, "sweep-ms")
	b.ReportMetric(l.Seconds()*1000, "near-limit-ms")

	// The reconcile at a restart, the kernel in place (count sets
	// included): BenchmarkShaper's figure, here with the count sets.
	run.stop(b)
	run, restart := startBench(b, env, ns)
	b.Logf("n=%d: reconcile at a restart with the kernel in place: %v", n, restart.Round(time.Millisecond))
}

// countLines runs a command in ns and reads its output whole, counting
// its lines.
func countLines(b *testing.B, ns *netns.NS, name string, args ...string) int {
	cmd := exec.Command("nsenter", append([]string{"--net=" + ns.Path(), name}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	lines := 0
	for sc.Scan() {
		lines++
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return lines
}

// BenchmarkCountSetMemory measures what the count sets cost the kernel
// per element: ROUTERD_BENCH_COUNTMEM elements (default 100,000) added by
// `nft -f` to a set with a counter per element and, for comparison, to
// one without, each three times in a namespace of its own; the kernel's
// unreclaimable slab and per-CPU memory (/proc/meminfo) before and after.
// The machine is shared: other work moves these figures too, hence
// three rounds.
func BenchmarkCountSetMemory(b *testing.B) {
	n := 100000
	if v := os.Getenv("ROUTERD_BENCH_COUNTMEM"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("ROUTERD_BENCH_COUNTMEM: %q", v)
		}
	}
	for i := 0; i < b.N; i++ {
		for _, counter := range []bool{true, false} {
			for round := 0; round < 3; round++ {
				ns := testenv.Netns(b)
				var f strings.Builder
				f.WriteString("table inet m {\n set s { type ipv4_addr;")
				if counter {
					f.WriteString(" counter;")
				}
				f.WriteString(" }\n}\n")
				for j := 0; j < n; j += 5000 {
					var els []string
					for k := j; k < min(n, j+5000); k++ {
						els = append(els, fmt.Sprintf("10.%d.%d.%d", k>>16&255, k>>8&255, k&255))
					}
					fmt.Fprintf(&f, "add element inet m s { %s }\n", strings.Join(els, ", "))
				}
				file := filepath.Join(b.TempDir(), "m.nft")
				if err := os.WriteFile(file, []byte(f.String()), 0o644); err != nil {
					b.Fatal(err)
				}
				before := kernMem(b)
				testenv.Run(b, ns, "nft", "-f", file)
				after := kernMem(b)
				testenv.Run(b, ns, "nft", "delete", "table", "inet", "m")
				b.Logf("%d elements, counter %v, round %d: unreclaimable slab +%d KB, per-CPU +%d KB: %.0f bytes per element",
					n, counter, round+1, after[0]-before[0], after[1]-before[1], float64((after[0]-before[0])+(after[1]-before[1]))*1024/float64(n))
			}
		}
	}
}

// kernMem is SUnreclaim and Percpu of /proc/meminfo, in KB.
func kernMem(b *testing.B) [2]int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var out [2]int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		v, _ := strconv.Atoi(fs[1])
		switch fs[0] {
		case "SUnreclaim:":
			out[0] = v
		case "Percpu:":
			out[1] = v
		}
	}
	return out
}
