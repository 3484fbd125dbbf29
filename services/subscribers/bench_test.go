package subscribers_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"routerd.dev/shared/testenv"
)

// BenchmarkClients adds clients through the gateway (POST /clients with a
// plan: stored with its index keys in one etcd transaction, reserved in
// the real dhcp service, shaped by the shaper's stand-in on the bus) at
// 1,000 and 10,000 clients (ROUTERD_BENCH_CLIENTS overrides the larger
// count; run once: -bench Clients -benchtime 1x, as root;
// ROUTERD_BENCH_REAL=1 runs the real shaper and firewall in the namespace
// instead of their stand-ins):
//
//   - adds_per_s: the first n-200 added by 8 callers at once;
//   - add_p50_ms/add_p99_ms: the last 200 added one at a time (the
//     latency of one add with n clients stored);
//   - suspend_p50_ms, plan_p50_ms: one POST /suspend, one POST /plan;
//   - plan_rates_ms: POST /plans with new rates for the plan of n-100
//     clients (the shaper reshapes them all in one plans.rates);
//   - list_ms, active_ms: GET /clients and GET /clients/active of all;
//   - reconcile_ms: the reconcile of every client's effects (paging dhcp,
//     shaper and firewall, nothing to change);
//   - heap_MB: the test process's heap in use (etcd, NATS, dhcp and the
//     gateway share it).
func BenchmarkClients(b *testing.B) {
	big := 10000
	if s := os.Getenv("ROUTERD_BENCH_CLIENTS"); s != "" {
		big, _ = strconv.Atoi(s)
	}
	expiryEvery = time.Hour
	defer func() { expiryEvery = 200 * time.Millisecond }()
	for _, n := range []int{1000, big} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				benchClients(b, n)
			}
		})
	}
}

func benchIP(i int) string {
	return netip.AddrFrom4([4]byte{10, 64 + byte(i>>16), byte(i >> 8), byte(i)}).Next().Next().String()
}

func benchMAC(i int) string {
	return fmt.Sprintf("02:BE:%02X:%02X:%02X:%02X", byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
}

func pct(d []time.Duration, p float64) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[int(float64(len(d)-1)*p)]) / float64(time.Millisecond)
}

func benchClients(b *testing.B, n int) {
	b.StopTimer()
	r := newRig(b, os.Getenv("ROUTERD_BENCH_REAL") != "")
	testenv.Run(b, r.ns, "ip", "link", "add", "bench0", "type", "veth", "peer", "name", "bench1")
	testenv.Run(b, r.ns, "ip", "link", "set", "bench0", "up")
	testenv.Run(b, r.ns, "ip", "addr", "add", "10.64.0.1/14", "dev", "bench0")
	if st, m := r.do(b, "POST", "/net", map[string]any{"iface": "bench0"}); st != 201 {
		b.Fatalf("POST /net: %d %v", st, m)
	}
	for _, p := range []string{"bench", "fast"} {
		if st, m := r.do(b, "POST", "/plans", map[string]any{"name": p, "down_mbps": 20, "up_mbps": 10}); st != 201 {
			b.Fatalf("plan: %d %v", st, m)
		}
	}
	add := func(i int) time.Duration {
		t0 := time.Now()
		st, m := r.do(b, "POST", "/clients", map[string]any{"mac": benchMAC(i), "ip": benchIP(i), "plan": "bench"})
		if st != 201 {
			b.Fatalf("add %d: %d %v", i, st, m)
		}
		return time.Since(t0)
	}
	b.StartTimer()
	bulk := n - 200
	t0 := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				add(i)
			}
		}()
	}
	for i := 0; i < bulk; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	rate := float64(bulk) / time.Since(t0).Seconds()
	var lat []time.Duration
	for i := bulk; i < n; i++ {
		lat = append(lat, add(i))
	}
	b.StopTimer()
	timed := func(k int, f func(i int)) []time.Duration {
		var d []time.Duration
		for i := 0; i < k; i++ {
			t := time.Now()
			f(i)
			d = append(d, time.Since(t))
		}
		return d
	}
	susp := timed(100, func(i int) {
		if st, m := r.do(b, "POST", "/suspend", map[string]any{"mac": benchMAC(i)}); st != 200 {
			b.Fatalf("suspend: %d %v", st, m)
		}
	})
	plan := timed(100, func(i int) {
		if st, m := r.do(b, "POST", "/plan", map[string]any{"mac": benchMAC(i), "plan": "fast"}); st != 200 {
			b.Fatalf("plan: %d %v", st, m)
		}
	})
	// New rates of the plan most clients are on: one POST /plans.
	rates := timed(1, func(int) {
		if st, m := r.do(b, "POST", "/plans", map[string]any{"name": "bench", "down_mbps": 30, "up_mbps": 15}); st != 200 {
			b.Fatalf("plan rates: %d %v", st, m)
		}
	})
	list := timed(3, func(int) {
		if st, m := r.do(b, "GET", "/clients", nil); st != 200 || m["count"] != float64(n) {
			b.Fatalf("list: %d %v", st, m["count"])
		}
	})
	active := timed(3, func(int) {
		if st, m := r.do(b, "GET", "/clients/active", nil); st != 200 || m["count"] != float64(n) {
			b.Fatalf("active: %d %v", st, m["count"])
		}
	})
	rt := time.Now()
	res, err := r.svc.Clients().Reconcile(context.Background())
	if err != nil || res.Clients != n || res.Failed != 0 || res.Reserved+res.Shaped+res.Blocked+res.Unreserved+res.Unshaped+res.Unblocked != 0 {
		b.Fatalf("reconcile: %+v %v", res, err)
	}
	rec := time.Since(rt)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(rate, "adds_per_s")
	b.ReportMetric(pct(lat, 0.5), "add_p50_ms")
	b.ReportMetric(pct(lat, 0.99), "add_p99_ms")
	b.ReportMetric(pct(susp, 0.5), "suspend_p50_ms")
	b.ReportMetric(pct(plan, 0.5), "plan_p50_ms")
	b.ReportMetric(pct(rates, 0.5), "plan_rates_ms")
	b.ReportMetric(pct(list, 0.5), "list_ms")
	b.ReportMetric(pct(active, 0.5), "active_ms")
	b.ReportMetric(float64(rec)/float64(time.Millisecond), "reconcile_ms")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap_MB")
}
