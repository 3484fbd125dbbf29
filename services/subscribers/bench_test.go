package subscribers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/shared/testenv"
)

// BenchmarkClients adds clients through the gateway (POST /clients with a
// plan: stored with its index keys in one etcd transaction, reserved in
// the real dhcp service, shaped by the shaper's stand-in on the bus) at
// 1,000 and 10,000 clients (ROUTERD_BENCH_CLIENTS overrides the larger
// count; run once: -bench 'Clients$' -benchtime 1x, as root). Every
// client is added on one plan, "bench" (an operator's one plan for
// everyone):
//
//   - adds_per_s: the first n-200 added by 8 callers at once;
//   - add_p50_ms/add_p99_ms: the last 200 added one at a time (the
//     latency of one add with n clients stored; with the real shaper
//     once it has settled after the bulk, settle_ms: no tc change for a
//     second, its spare classes made), each then offered its
//     address by dhcp to a DHCPDISCOVER from its MAC (offer_p50_ms, the
//     probe's round trip; an add without that offer fails the run);
//   - plan_all_ms: POST /plans with new rates for "bench", held by all n
//     clients (the shaper reshapes them all in one plans.rates), and
//     events_all_ms until the last of its n client.reshaped events came
//     (a different count fails the run);
//   - suspend_p50_ms, plan_p50_ms: one POST /suspend, one POST /plan;
//   - moves_per_s: k = min(10,000, n/10) further clients moved by POST
//     /plan to the plan "tenk" by 8 callers at once;
//   - plan_rates_ms: POST /plans with new rates for "tenk" (its k
//     clients: the plan change of 10,000 at 100,000), events_ms
//     until the last of its k client.reshaped events came, events_own_ms
//     the events' own part (the plan's records read and published,
//     called alone);
//   - list_ms, active_ms: GET /clients and GET /clients/active of all;
//   - reconcile_ms: the reconcile of every client's effects (paging dhcp,
//     shaper and firewall, nothing to change), what the service does at
//     start;
//   - heap_MB, rss_MB: the test process's heap in use (after a GC) and
//     resident size at the end; heap_peak_MB, rss_peak_MB the peaks over
//     the run (heap in use sampled every 250 ms, VmHWM reset at the
//     start of each size). etcd, NATS, dhcp, the gateway (and the real
//     shaper and firewall) share the process: routerd's own services in
//     one process, less the kernel.
func BenchmarkClients(b *testing.B) { benchSizes(b, false) }

// BenchmarkClientsKernel is BenchmarkClients with the real shaper and
// firewall services in the router's namespace (created by the test, as is
// the subscriber side's), and the kernel's own word on when each change
// was applied: the namespace's tc and nftables announcements are watched
// (kernelWatch) and, per request, the latest one of the owner's kind after
// the request was sent is when it was done in the kernel:
//
//   - ready_p50_ms/ready_p99_ms: from POST /clients sent to the last of
//     the shaper's classes, filters and map elements for the client
//     announced (its reservation precedes: dhcp is asked first, and its
//     offer is checked after the answer); an add with none fails the run;
//   - suspend_kernel_p50_ms: from POST /suspend to the firewall's element;
//   - plan_kernel_p50_ms: from POST /plan to the shaper's class change.
func BenchmarkClientsKernel(b *testing.B) { benchSizes(b, true) }

func benchSizes(b *testing.B, real bool) {
	big := 10000
	if s := os.Getenv("ROUTERD_BENCH_CLIENTS"); s != "" {
		big, _ = strconv.Atoi(s)
	}
	expiryEvery = time.Hour
	defer func() { expiryEvery = 200 * time.Millisecond }()
	sizes := []int{1000, big}
	if big <= 1000 {
		sizes = []int{big}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				benchClients(b, n, real)
			}
		})
	}
}

// benchNets is how many served networks the clients are spread over:
// one /16 on an interface of its own each (10.64.0.0/16 on bnr0 to
// 10.67.0.0/16 on bnr3), client i on network i%benchNets, so 100,000
// clients are 25,000 per /16 (the shaper's HTB root per interface).
const benchNets = 4

func benchIP(i int) string {
	j := i / benchNets
	return netip.AddrFrom4([4]byte{10, 64 + byte(i%benchNets), byte(j >> 8), byte(j)}).Next().Next().String()
}

func benchMAC(i int) string {
	return fmt.Sprintf("02:BE:%02X:%02X:%02X:%02X", byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
}

func pct(d []time.Duration, p float64) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[int(float64(len(d)-1)*p)]) / float64(time.Millisecond)
}

func benchClients(b *testing.B, n int, real bool) {
	b.StopTimer()
	r := newRig(quietTB{b}, real)
	// The subscribers' side of the served links in a namespace of its own:
	// the DHCP probe's frames come to the router from outside.
	sub := testenv.Netns(b)
	var probes []*dhcpProbe
	for k := 0; k < benchNets; k++ {
		rt, st := fmt.Sprintf("bnr%d", k), fmt.Sprintf("bns%d", k)
		testenv.Run(b, r.ns, "ip", "link", "add", rt, "type", "veth", "peer", "name", st)
		testenv.Run(b, r.ns, "ip", "link", "set", st, "netns", sub.Path())
		testenv.Run(b, sub, "ip", "link", "set", st, "up")
		testenv.Run(b, r.ns, "ip", "link", "set", rt, "up")
		testenv.Run(b, r.ns, "ip", "addr", "add", fmt.Sprintf("10.%d.0.1/16", 64+k), "dev", rt)
		probes = append(probes, newDHCPProbe(b, sub, st))
		if code, m := r.do(b, "POST", "/net", map[string]any{"iface": rt}); code != 201 {
			b.Fatalf("POST /net %s: %d %v", rt, code, m)
		}
	}
	for _, p := range []string{"bench", "fast", "tenk"} {
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
	peak := watchMemory()
	defer peak.stop()
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
	peak.mark("bulk adds")
	var kw *kernelWatch
	shaperKind := func(k string) bool { return k == "tc" || k == "nft:routerd_shaper" }
	var settle time.Duration
	if real {
		kw = watchKernel(b, r.ns)
		// The shaper makes spare classes while idle (a new subscriber
		// takes one instead of creating a class); 8 callers adding at
		// once leave it none. The one-at-a-time adds are those of a
		// router that has settled: no tc change for a second (at most
		// two minutes).
		st := time.Now()
		for end := st.Add(2 * time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if _, busy := kw.last(time.Now().Add(-time.Second), func(k string) bool { return k == "tc" }); !busy && time.Since(st) > time.Second {
				break
			}
		}
		settle = time.Since(st) - time.Second
	}
	var lat, ready, offers []time.Duration
	for i := bulk; i < n; i++ {
		t := time.Now()
		lat = append(lat, add(i))
		o := time.Now()
		ip, err := probes[i%benchNets].offer(benchMAC(i), 2*time.Second)
		if err != nil || ip != benchIP(i) {
			b.Fatalf("client %d (%s %s) added, but dhcp offers %q: %v", i, benchMAC(i), benchIP(i), ip, err)
		}
		offers = append(offers, time.Since(o))
		if kw != nil {
			at, ok := kw.last(t, shaperKind)
			for w := time.Now().Add(time.Second); !ok && time.Now().Before(w); at, ok = kw.last(t, shaperKind) {
				time.Sleep(time.Millisecond)
			}
			if !ok {
				b.Fatalf("client %d added, but no shaper change announced by the kernel (%v)", i, kw)
			}
			ready = append(ready, at.Sub(t))
		}
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
	// inKernel is how long after t the latest announced change of a kind
	// came (the real owners only).
	var suspK, planK []time.Duration
	inKernel := func(t time.Time, into *[]time.Duration, what string, kind func(string) bool) {
		if kw == nil {
			return
		}
		at, ok := kw.last(t, kind)
		for w := time.Now().Add(time.Second); !ok && time.Now().Before(w); at, ok = kw.last(t, kind) {
			time.Sleep(time.Millisecond)
		}
		if !ok {
			b.Fatalf("%s: no change announced by the kernel (%v)", what, kw)
		}
		*into = append(*into, at.Sub(t))
	}
	// reshapes is POST /plans giving plan p new rates, how long it took,
	// and when the last of the want client.reshaped events came after it
	// was sent (fewer or more within the wait fails the run).
	reshapes := func(p string, down, up, want int) (answered, lastAt time.Duration) {
		var events, lastEvent atomic.Int64
		es, err := r.env.NC.Subscribe(event.Subject("subscribers", api.ClientReshaped), func(m *nats.Msg) {
			events.Add(1)
			lastEvent.Store(time.Now().UnixNano())
		})
		if err != nil {
			b.Fatal(err)
		}
		defer es.Unsubscribe()
		_ = r.env.NC.Flush()
		t0 := time.Now()
		if st, m := r.do(b, "POST", "/plans", map[string]any{"name": p, "down_mbps": down, "up_mbps": up}); st != 200 {
			b.Fatalf("plan %s's rates: %d %v", p, st, m)
		}
		answered = time.Since(t0)
		for end := time.Now().Add(30*time.Second + time.Duration(want)*time.Millisecond); events.Load() < int64(want) && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if got := events.Load(); got != int64(want) {
			b.Fatalf("%d client.reshaped events for plan %s's %d clients", got, p, want)
		}
		return answered, time.Duration(lastEvent.Load() - t0.UnixNano())
	}
	// One plan for everyone given new rates: all n reshaped.
	peak.mark("timed adds")
	planAll, eventsAll := reshapes("bench", 30, 15, n)
	peak.mark("POST /plans of all")
	susp := timed(100, func(i int) {
		t := time.Now()
		if st, m := r.do(b, "POST", "/suspend", map[string]any{"mac": benchMAC(i)}); st != 200 {
			b.Fatalf("suspend: %d %v", st, m)
		}
		inKernel(t, &suspK, "suspend", func(k string) bool { return k == "nft:routerd_firewall" })
	})
	plan := timed(100, func(i int) {
		t := time.Now()
		if st, m := r.do(b, "POST", "/plan", map[string]any{"mac": benchMAC(i), "plan": "fast"}); st != 200 {
			b.Fatalf("plan: %d %v", st, m)
		}
		inKernel(t, &planK, "plan change", shaperKind)
	})
	// k more clients moved to "tenk" by 8 callers, whose new rates are
	// the plan change of 10,000 clients (at 100,000).
	k := min(10000, n/10)
	mt := time.Now()
	moves := make(chan int)
	var mwg sync.WaitGroup
	for w := 0; w < 8; w++ {
		mwg.Add(1)
		go func() {
			defer mwg.Done()
			for i := range moves {
				if st, m := r.do(b, "POST", "/plan", map[string]any{"mac": benchMAC(i), "plan": "tenk"}); st != 200 {
					b.Errorf("move %d: %d %v", i, st, m)
				}
			}
		}()
	}
	for i := 100; i < 100+k; i++ {
		moves <- i
	}
	close(moves)
	mwg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	moveRate := float64(k) / time.Since(mt).Seconds()
	rates, eventsAt := reshapes("tenk", 40, 20, k)
	// The events' own part of it: the plan's records read and published.
	et := time.Now()
	if got, err := r.svc.Clients().Reshaped(context.Background(), "tenk"); err != nil || got != k {
		b.Fatalf("reshaped events: %d %v", got, err)
	}
	eventsOwn := time.Since(et)
	peak.mark("suspends, plan changes, moves, POST /plans of k")
	list := timed(3, func(int) {
		if st, c := r.count(b, "/clients"); st != 200 || c != n {
			b.Fatalf("list: %d %d", st, c)
		}
	})
	active := timed(3, func(int) {
		if st, c := r.count(b, "/clients/active"); st != 200 || c != n {
			b.Fatalf("active: %d %d", st, c)
		}
	})
	peak.mark("GET /clients, GET /clients/active")
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
	b.ReportMetric(pct(offers, 0.5), "offer_p50_ms")
	if kw != nil {
		b.ReportMetric(float64(settle)/float64(time.Millisecond), "settle_ms")
		b.ReportMetric(pct(ready, 0.5), "ready_p50_ms")
		b.ReportMetric(pct(ready, 0.99), "ready_p99_ms")
		b.ReportMetric(pct(suspK, 0.5), "suspend_kernel_p50_ms")
		b.ReportMetric(pct(planK, 0.5), "plan_kernel_p50_ms")
		if o := kw.overflows(); o > 0 {
			b.Logf("the kernel dropped announcements %d times: a change may have been missed", o)
		}
	}
	b.ReportMetric(pct(susp, 0.5), "suspend_p50_ms")
	b.ReportMetric(pct(plan, 0.5), "plan_p50_ms")
	b.ReportMetric(float64(planAll)/float64(time.Millisecond), "plan_all_ms")
	b.ReportMetric(float64(eventsAll)/float64(time.Millisecond), "events_all_ms")
	b.ReportMetric(moveRate, "moves_per_s")
	b.ReportMetric(float64(rates)/float64(time.Millisecond), "plan_rates_ms")
	b.ReportMetric(float64(eventsAt)/float64(time.Millisecond), "events_ms")
	b.ReportMetric(float64(eventsOwn)/float64(time.Millisecond), "events_own_ms")
	b.ReportMetric(pct(list, 0.5), "list_ms")
	b.ReportMetric(pct(active, 0.5), "active_ms")
	b.ReportMetric(float64(rec)/float64(time.Millisecond), "reconcile_ms")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap_MB")
	b.ReportMetric(procStatusMB("VmRSS:"), "rss_MB")
	peak.mark("reconcile")
	heapPeak := peak.stop()
	b.Logf("heap in use, peak by phase: %s", strings.Join(peak.phases, ", "))
	b.ReportMetric(heapPeak/(1<<20), "heap_peak_MB")
	b.ReportMetric(procStatusMB("VmHWM:"), "rss_peak_MB")
}

// count GETs path and reads only the answer's count: the whole answer
// decoded into maps (r.do) would put 100,000 clients' worth of the
// benchmark's own garbage into the heap being measured.
func (r *rig) count(b *testing.B, path string) (int, int) {
	req, err := http.NewRequest("GET", r.url+path, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	var a struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		b.Fatalf("GET %s: %d, not JSON: %.200s", path, resp.StatusCode, raw)
	}
	return resp.StatusCode, a.Count
}

// quietTB is the benchmark's testing.TB for the rig's services' logs:
// only warnings, errors and the lines benchLogKept names reach b.Log. A
// testing.B keeps every logged line in memory until it ends: a debug line
// per request, several per add, would make the 100,000 run's heap the
// test's log rather than routerd's (a real routerd writes its log out).
type quietTB struct{ testing.TB }

// benchLogKept are the log messages a benchmark keeps besides warnings
// and errors: the shaper's own timing of a reshape, the reconciles.
var benchLogKept = []string{`msg="plan reshaped"`, `msg="clients' effects reconciled"`, `msg="shaping reconciled`}

func (q quietTB) Log(args ...any) {
	line := fmt.Sprint(args...)
	if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || slices.ContainsFunc(benchLogKept, func(k string) bool { return strings.Contains(line, k) }) {
		q.TB.Log(line)
	}
}

func (q quietTB) Logf(format string, args ...any) { q.Log(fmt.Sprintf(format, args...)) }

// memPeak samples the heap in use until stopped and keeps its peak, over
// the whole run and per phase (mark).
type memPeak struct {
	done   chan struct{}
	once   sync.Once
	max    atomic.Uint64
	phase  atomic.Uint64
	phases []string
	wg     sync.WaitGroup
}

// watchMemory resets the process's peak resident size (VmHWM, by
// /proc/self/clear_refs) and samples the heap in use every 250 ms.
func watchMemory() *memPeak {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	p := &memPeak{done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			p.sample()
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *memPeak) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for _, m := range []*atomic.Uint64{&p.max, &p.phase} {
		for v := m.Load(); ms.HeapInuse > v && !m.CompareAndSwap(v, ms.HeapInuse); v = m.Load() {
		}
	}
}

// mark ends a phase: its peak is noted under its name and the next
// phase's begins.
func (p *memPeak) mark(name string) {
	p.sample()
	p.phases = append(p.phases, fmt.Sprintf("%s %.0f MB", name, float64(p.phase.Swap(0))/(1<<20)))
}

// stop ends the sampling and returns the peak heap in use in bytes.
func (p *memPeak) stop() float64 {
	p.once.Do(func() { close(p.done) })
	p.wg.Wait()
	return float64(p.max.Load())
}

// procStatusMB is a size field of /proc/self/status (VmRSS:, VmHWM:) in
// MB, 0 when unreadable.
func procStatusMB(field string) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
