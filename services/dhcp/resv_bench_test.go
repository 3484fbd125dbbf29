package dhcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// BenchmarkReservations measures reservations stored one key each, at
// 1,000 and 100,000 subscribers (run it once: -bench Reservations
// -benchtime 1x; as root, for the namespace):
//
//   - bulk_keys_per_s: the keys written straight to etcd in transactions
//     of 100 (how a migration or a restore fills the store);
//   - load_ms: the start load (range reads + one compilation);
//   - heap_MB: the engine's heap after the load, the service's own
//     copies included, minus the heap before it;
//   - put_us: one element change in the engine (validate + in-place update);
//   - bus_p50_ms/bus_p99_ms: one reservations.clients.put through the bus
//     (engine + fenced etcd write), answered when served; bus_writes_per_s
//     with 8 callers at once;
//   - watch_p50_ms/watch_p99_ms: a key written by another writer straight
//     to etcd until the engine serves it (the watch path).
func BenchmarkReservations(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				benchReservations(b, n)
			}
		})
	}
}

func benchNet() config.Config {
	return config.Config{Networks: []config.Network{{Iface: "bench0", Gateway: netip.MustParseAddr("10.64.0.1"),
		Prefix: netip.MustParsePrefix("10.64.0.0/14")}}}
}

func benchAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 64 + byte(i>>16), byte(i >> 8), byte(i)}).Next().Next()
}

func benchMAC(i int) string {
	return fmt.Sprintf("02:BE:%02X:%02X:%02X:%02X", byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
}

func benchReservations(b *testing.B, n int) {
	b.StopTimer()
	ctx := context.Background()
	env := testenv.Start(b)
	cfg := benchNet()
	raw, _ := json.Marshal(cfg)
	if _, err := env.KV.Put(ctx, store.Root+Name+"/"+ConfigDoc, string(raw)); err != nil {
		b.Fatal(err)
	}
	// The keys, written in transactions of 100.
	t0 := time.Now()
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < min(i+100, n); j++ {
			v, _ := json.Marshal(config.Client{MAC: benchMAC(j), IP: benchAddr(j)})
			ops = append(ops, clientv3.OpPut(store.Root+Name+"/"+resvClients+benchMAC(j), string(v)))
		}
		if _, err := env.KV.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/time.Since(t0).Seconds(), "bulk_keys_per_s")

	// The start load, as serve does it, into an engine on the stored
	// configuration.
	svc, err := NewService(ServiceDeps{NC: env.NC, KV: env.KV, NS: testenv.Netns(b), Log: testenv.Log(b)})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.StartTimer()
	t0 = time.Now()
	eng, err := New(cfg, Deps{Store: lease.NewMemStore(), NetNS: svc.d.NS, Log: svc.d.Log})
	if err != nil {
		b.Fatal(err)
	}
	rev, err := svc.loadReservationsAt(ctx, eng)
	load := time.Since(t0)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if c, _ := eng.ReservationCounts(); c != n {
		b.Fatalf("loaded %d of %d", c, n)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(load.Microseconds())/1000, "load_ms")
	b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/(1<<20), "heap_MB")

	// One element change in the engine.
	const changes = 2000
	t0 = time.Now()
	for i := range changes {
		if _, err := eng.PutClient(config.Client{MAC: benchMAC(i), IP: benchAddr(n + i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/changes, "put_us")

	// The service on the bus with this engine, and the watch from rev.
	lock, err := store.Acquire(ctx, env.KV, Name+"/bench")
	if err != nil {
		b.Fatal(err)
	}
	svc.wst = svc.st.Fenced(lock)
	svc.mu.Lock()
	svc.eng = eng
	svc.mu.Unlock()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = bus.Run(sctx, env.NC, bus.ServiceConfig{Name: Name, Version: "1.0.0", Log: svc.d.Log, Endpoints: svc.Endpoints()})
	}()
	go func() { defer wg.Done(); svc.watchReservations(sctx, eng, rev) }()
	defer wg.Wait()
	defer cancel()
	testenv.Eventually(b, 10*time.Second, func() error {
		_, err := bus.Invoke(ctx, env.NC, api.ReservationsList, &api.ReservationFilter{Kind: "clients", Limit: 1})
		return err
	})

	const calls = 400
	lat := make([]time.Duration, calls)
	var next sync.Mutex
	k := 0
	t0 = time.Now()
	var cw sync.WaitGroup
	for range 8 {
		cw.Add(1)
		go func() {
			defer cw.Done()
			for {
				next.Lock()
				i := k
				k++
				next.Unlock()
				if i >= calls {
					return
				}
				s := time.Now()
				if _, err := bus.Invoke(ctx, env.NC, api.ReservationPutClient, &api.ClientReservation{
					MAC: benchMAC(1<<20 + i), IP: benchAddr(n + changes + i).String()}); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(s)
			}
		}()
	}
	cw.Wait()
	b.ReportMetric(calls/time.Since(t0).Seconds(), "bus_writes_per_s")
	p50, p99 := pct(lat)
	b.ReportMetric(p50, "bus_p50_ms")
	b.ReportMetric(p99, "bus_p99_ms")

	// The watch path: a key written straight to etcd, until served.
	const watched = 200
	wl := make([]time.Duration, watched)
	for i := range watched {
		c := config.Client{MAC: benchMAC(1<<21 + i), IP: benchAddr(n + changes + calls + i)}
		v, _ := json.Marshal(c)
		s := time.Now()
		if _, err := env.KV.Put(ctx, store.Root+Name+"/"+resvClients+c.MAC, string(v)); err != nil {
			b.Fatal(err)
		}
		for {
			if _, ok := eng.client(c.MAC); ok {
				break
			}
			time.Sleep(50 * time.Microsecond)
			if time.Since(s) > 5*time.Second {
				b.Fatalf("reservation %s not served 5 s after its write", c.MAC)
			}
		}
		wl[i] = time.Since(s)
	}
	p50, p99 = pct(wl)
	b.ReportMetric(p50, "watch_p50_ms")
	b.ReportMetric(p99, "watch_p99_ms")
}

func pct(d []time.Duration) (p50, p99 float64) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	return ms(s[len(s)/2]), ms(s[len(s)*99/100])
}
