package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/subscribers"
	"routerd.dev/services/system"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// BenchmarkBackupRestore: GET /backup and POST /restore of a router with
// 1,000, 10,000 and 100,000 MAC clients, through the gateway, with the real
// subscribers, dhcp and system services: each client its own record in
// the subscribers' keys (etc/clients.json: one key per client plus its
// index keys, written through the client book as an import writes them)
// and its DHCP reservation in dhcp's (etc/dhcp-reservations.json: one key
// each, as the subscribers service reserves them). It reports the
// archive's size, the time of each, and the peak heap and RSS of the
// process during each (every service, the bus, the gateway and etcd run
// in it, as in routerd --lab; heap above what was in use before, RSS
// whole). The restore brings the archive's documents back over the
// running configuration: the running one saved first as the undo
// version, then every client and reservation checked and written again
// and the DHCP engine reloaded; then the subscribers service reconciles
// the clients' effects with their owners (reconcile-s, from the start of
// the restore to the end of that reconcile; nothing to change). An import
// writes only what differs from what is stored, so that restore writes
// next to nothing; the same archive is then restored into the router
// emptied of its clients and reservations (restore-empty-s and its
// peaks), where every key is written again.
//
// The shaper and the firewall are stood in on the bus (shapes and blocks
// held in maps, paged as theirs are): the real shaper's full build of
// 100,000 subscribers takes 18 minutes (its own benchmark), which would
// dominate; here the reconcile finds every client shaped as its plan says.
//
//	go test -run '^$' -bench BackupRestore -benchtime 1x ./integration/bench/
func BenchmarkBackupRestore(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the dhcp service serves an interface in a namespace")
	}
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) { benchBackupRestore(b, n) })
	}
}

// Each bench client's plan.
const (
	benchPlan               = "gold"
	benchDown, benchUp      = 500, 100
	benchIface, benchGW     = "bk0", "10.100.0.1"
	benchNet                = "10.100.0.0/14"
	reconciledMsg           = "clients' effects reconciled"
	benchLoadWorkers        = 4
	benchClientsPerLoadCall = 1000
)

// benchClient is client i as POST /clients would store it.
func benchClient(i int) api.Client {
	base := netip.MustParseAddr("10.100.1.0").As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3]) + uint32(i)
	plan, network := benchPlan, benchNet
	return api.Client{
		MAC:      fmt.Sprintf("02:42:%02X:%02X:%02X:%02X", byte(i>>24), byte(i>>16), byte(i>>8), byte(i)),
		IP:       netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String(),
		Plan:     &plan,
		Hostname: fmt.Sprintf("sub-%d", i),
		Network:  &network, Iface: benchIface, Gateway: benchGW,
		Comment: "fibre, building 7", Created: "2026-11-24 10:00:00",
	}
}

func benchBackupRestore(b *testing.B, n int) {
	env := testenv.Start(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := bus.EnsureStream(ctx, env.NC); err != nil {
		b.Fatal(err)
	}
	ns := testenv.Netns(b)
	testenv.Run(b, ns, "ip", "link", "add", benchIface, "type", "veth", "peer", "name", "bk1")
	testenv.Run(b, ns, "ip", "addr", "add", benchGW+"/14", "dev", benchIface)
	testenv.Run(b, ns, "ip", "link", "set", benchIface, "up")
	testenv.Run(b, ns, "ip", "link", "set", "bk1", "up")

	// The served network; each client's reservation, stored as the dhcp
	// service stores it.
	st := store.New(env.KV, dhcp.Name)
	cfg := config.Config{Networks: []config.Network{{Iface: benchIface, Gateway: netip.MustParseAddr(benchGW),
		Prefix: netip.MustParsePrefix(benchNet), Label: "bench"}}}
	if _, err := st.Txn().Put(st.Key(dhcp.ConfigDoc), cfg).Commit(ctx); err != nil {
		b.Fatal(err)
	}
	// The subscribers service (its start reconcile left out: the bench
	// stores what each owner holds itself) and the clients, through its
	// client book.
	reconciled := make(chan string, 16)
	sub := subscribers.New(subscribers.Deps{NC: env.NC, KV: env.KV, NoReconcile: true,
		Log: slog.New(&watchHandler{Handler: benchLog.Handler(), msg: reconciledMsg, seen: reconciled})})
	fx := newFxStandIn()
	t0 := time.Now()
	var wg sync.WaitGroup
	var werr atomic.Pointer[error]
	for w := 0; w < benchLoadWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := w * benchClientsPerLoadCall; from < n; from += benchLoadWorkers * benchClientsPerLoadCall {
				clients := make([]api.Client, 0, benchClientsPerLoadCall)
				txn := st.Txn()
				for i := from; i < min(from+benchClientsPerLoadCall, n); i++ {
					c := benchClient(i)
					clients = append(clients, c)
					txn.Put(st.Key(dhcp.ResvPrefix+"clients/"+c.MAC), config.Client{MAC: c.MAC, IP: netip.MustParseAddr(c.IP), Hostname: c.Hostname})
					fx.put(api.Shape{ID: c.MAC, IP: c.IP, Iface: c.Iface, Plan: benchPlan, DownMbps: benchDown, UpMbps: benchUp})
					if len(clients)%100 == 0 {
						if _, err := txn.Commit(ctx); err != nil {
							werr.Store(&err)
							return
						}
						txn = st.Txn()
					}
				}
				if _, err := txn.Commit(ctx); err != nil {
					werr.Store(&err)
					return
				}
				if err := sub.Clients().Load(ctx, clients); err != nil {
					werr.Store(&err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := werr.Load(); e != nil {
		b.Fatal(*e)
	}
	b.Logf("%d clients and their reservations stored in %.1f s", n, time.Since(t0).Seconds())

	d, err := dhcp.NewService(dhcp.ServiceDeps{NC: env.NC, KV: env.KV, NS: ns, Log: benchLog})
	if err != nil {
		b.Fatal(err)
	}
	sys := system.New(system.Deps{NC: env.NC, KV: env.KV, Log: benchLog, StateDir: b.TempDir(),
		Owners: []api.ConfigOwner{api.DHCPConfig, api.SubscribersConfig}})
	for _, run := range []func(context.Context) error{d.Run, sys.Run, sub.Run, fx.shaper(env.NC), fx.firewall(env.NC)} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	defer wg.Wait()
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	if missing := bus.WaitUp(wctx, env.NC, dhcp.Name, system.Name, subscribers.Name, "shaper", "firewall"); missing != nil {
		b.Fatalf("not up: %v", missing)
	}
	wcancel()
	gw, err := gateway.New(gateway.Config{APIKey: key, NC: env.NC, Log: benchLog})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = gw.Serve(ctx, l) }()
	url := "http://" + l.Addr().String()

	do := func(method, path string, body any) (*http.Response, []byte) {
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, _ := http.NewRequest(method, url+path, rd)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp, out
	}
	if resp, body := do("POST", "/plans", map[string]any{"name": benchPlan, "down_mbps": benchDown, "up_mbps": benchUp}); resp.StatusCode != 201 {
		b.Fatalf("plan: %d %s", resp.StatusCode, body)
	}
	clientsNow := func() int64 {
		resp, body := do("GET", "/status", nil)
		var st api.Status
		if resp.StatusCode != 200 || json.Unmarshal(body, &st) != nil {
			b.Fatalf("status: %d %s", resp.StatusCode, body)
		}
		return st.TotalClients
	}
	if got := clientsNow(); got != int64(n) {
		b.Fatalf("%d clients stored", got)
	}

	file := filepath.Join(b.TempDir(), "backup.tar.gz")
	var backupS, restoreS, reconcileS float64
	var backupPeak, restorePeak peak
	var size int
	var outcome string
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := os.Create(file)
		if err != nil {
			b.Fatal(err)
		}
		backupPeak = backupPeak.max(measurePeak("backup", func() {
			t0 := time.Now()
			req, _ := http.NewRequest("GET", url+"/backup", nil)
			req.Header.Set("X-API-Key", key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				body, _ := io.ReadAll(resp.Body)
				b.Fatalf("backup: %d %s", resp.StatusCode, body)
			}
			// The archive goes to a file as it arrives (the client's
			// side holds none of it either).
			if _, err := io.Copy(out, resp.Body); err != nil {
				b.Fatal(err)
			}
			backupS += time.Since(t0).Seconds()
		}))
		if fi, err := out.Stat(); err == nil {
			size = int(fi.Size())
		}
		out.Close()
		for len(reconciled) > 0 {
			<-reconciled
		}
		var t0 time.Time
		restorePeak = restorePeak.max(measurePeak("restore", func() {
			t0 = time.Now()
			resp, body := do("POST", "/restore", map[string]any{"file": file})
			restoreS += time.Since(t0).Seconds()
			if resp.StatusCode != 200 {
				b.Fatalf("restore: %d %s", resp.StatusCode, body)
			}
		}))
		select {
		case outcome = <-reconciled:
			reconcileS += time.Since(t0).Seconds()
		case <-time.After(5 * time.Minute):
			b.Fatal("the subscribers service did not reconcile the clients' effects after the restore")
		}
	}
	b.StopTimer()
	b.Logf("after the restore: %s", outcome)
	if got := clientsNow(); got != int64(n) {
		b.Fatalf("%d clients after the restore", got)
	}
	if g, err := env.KV.Get(ctx, st.Key(dhcp.ResvPrefix+"clients/"), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || g.Count != int64(n) {
		b.Fatalf("reservations stored after the restore: %v %v; want %d", g, err, n)
	}
	if !strings.Contains(outcome, "failed=0") || !strings.Contains(outcome, fmt.Sprintf("clients=%d", n)) {
		b.Fatalf("the reconcile after the restore: %s", outcome)
	}
	// The same archive into a router without clients or reservations
	// (new hardware, or yesterday's configuration after they were all
	// removed): every client, index key and reservation written, nothing
	// left unchanged. The keys are removed as a wipe of the state would
	// leave them; the dhcp engine follows by its watch.
	if _, err := env.KV.Txn(ctx).Then(
		clientv3.OpDelete("/router/"+subscribers.Name+"/clients/", clientv3.WithPrefix()),
		clientv3.OpDelete("/router/"+subscribers.Name+"/index/", clientv3.WithPrefix()),
		clientv3.OpDelete(st.Key(dhcp.ResvPrefix), clientv3.WithPrefix()),
	).Commit(); err != nil {
		b.Fatal(err)
	}
	if got := clientsNow(); got != 0 {
		b.Fatalf("%d clients after removing them", got)
	}
	for len(reconciled) > 0 {
		<-reconciled
	}
	var emptyS, emptyReconcileS float64
	var t1 time.Time
	emptyPeak := measurePeak("restore-empty", func() {
		t1 = time.Now()
		resp, body := do("POST", "/restore", map[string]any{"file": file})
		emptyS = time.Since(t1).Seconds()
		if resp.StatusCode != 200 {
			b.Fatalf("restore into the emptied router: %d %s", resp.StatusCode, body)
		}
	})
	select {
	case outcome = <-reconciled:
		emptyReconcileS = time.Since(t1).Seconds()
	case <-time.After(5 * time.Minute):
		b.Fatal("the subscribers service did not reconcile the clients' effects after the restore into the emptied router")
	}
	b.Logf("after the restore into the emptied router: %s", outcome)
	if got := clientsNow(); got != int64(n) {
		b.Fatalf("%d clients after the restore into the emptied router", got)
	}
	if g, err := env.KV.Get(ctx, st.Key(dhcp.ResvPrefix+"clients/"), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || g.Count != int64(n) {
		b.Fatalf("reservations stored after the restore into the emptied router: %v %v; want %d", g, err, n)
	}
	if !strings.Contains(outcome, "failed=0") || !strings.Contains(outcome, fmt.Sprintf("clients=%d", n)) {
		b.Fatalf("the reconcile after the restore into the emptied router: %s", outcome)
	}
	floorS := storeFloor(b, ctx, env.KV,
		"/router/"+subscribers.Name+"/clients/", "/router/"+subscribers.Name+"/index/", st.Key(dhcp.ResvPrefix))
	b.ReportMetric(floorS, "store-floor-s")
	b.ReportMetric(emptyS/floorS, "restore-empty-per-floor")
	b.ReportMetric(emptyS, "restore-empty-s")
	b.ReportMetric(emptyReconcileS, "reconcile-empty-s")
	b.ReportMetric(emptyPeak.live/1e6, "restore-empty-peak-live-MB")
	b.ReportMetric(emptyPeak.heap/1e6, "restore-empty-peak-heap-MB")
	b.ReportMetric(emptyPeak.rss/1e6, "restore-empty-peak-RSS-MB")

	b.ReportMetric(float64(size)/1e6, "archive-MB")
	b.ReportMetric(backupS/float64(b.N), "backup-s")
	b.ReportMetric(restoreS/float64(b.N), "restore-s")
	b.ReportMetric(reconcileS/float64(b.N), "reconcile-s")
	b.ReportMetric(backupPeak.heap/1e6, "backup-peak-heap-MB")
	b.ReportMetric(restorePeak.heap/1e6, "restore-peak-heap-MB")
	b.ReportMetric(backupPeak.live/1e6, "backup-peak-live-MB")
	b.ReportMetric(restorePeak.live/1e6, "restore-peak-live-MB")
	b.ReportMetric(backupPeak.rss/1e6, "backup-peak-RSS-MB")
	b.ReportMetric(restorePeak.rss/1e6, "restore-peak-RSS-MB")
}

// watchHandler passes records on and sends the text of each one whose
// message is msg, with its attributes, to seen.
type watchHandler struct {
	slog.Handler
	msg  string
	seen chan string
}

func (h *watchHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		var sb strings.Builder
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&sb, "%s=%v ", a.Key, a.Value); return true })
		select {
		case h.seen <- strings.TrimSpace(sb.String()):
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *watchHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &watchHandler{Handler: h.Handler.WithAttrs(as), msg: h.msg, seen: h.seen}
}

func (h *watchHandler) WithGroup(g string) slog.Handler {
	return &watchHandler{Handler: h.Handler.WithGroup(g), msg: h.msg, seen: h.seen}
}

// fxStandIn stands in for the shaper and the firewall on the bus: the
// shapes and blocks they hold, paged by id as theirs are, changed by
// their operations.
type fxStandIn struct {
	mu     sync.Mutex
	shapes map[string]api.Shape
	blocks map[string]api.Block
}

func newFxStandIn() *fxStandIn {
	return &fxStandIn{shapes: map[string]api.Shape{}, blocks: map[string]api.Block{}}
}

func (f *fxStandIn) put(s api.Shape) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shapes[s.ID] = s
}

// page returns up to limit values of m after the key after, by key.
func page[V any](m map[string]V, after string, limit int) ([]V, string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	next := ""
	if len(keys) > limit {
		keys, next = keys[:limit], keys[limit-1]
	}
	out := make([]V, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out, next
}

func (f *fxStandIn) shaper(nc *nats.Conn) func(context.Context) error {
	return func(ctx context.Context) error {
		return bus.Run(ctx, nc, bus.ServiceConfig{Name: "shaper", Version: "0.0.0", Log: benchLog, Endpoints: []bus.Endpoint{
			bus.Bind(api.ShaperPage, func(_ context.Context, r *api.ShapePageRequest) (*api.ShapePage, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				s, next := page(f.shapes, r.After, r.Limit)
				return &api.ShapePage{Count: len(s), Shapes: s, Next: next}, nil
			}),
			bus.Bind(api.ShaperSet, func(_ context.Context, s *api.Shape) (*api.ShapeAnswer, error) {
				f.put(*s)
				return &api.ShapeAnswer{}, nil
			}),
			bus.Bind(api.ShaperRemove, func(_ context.Context, r *api.ShapeRef) (*api.ShapeAnswer, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				delete(f.shapes, r.ID)
				return &api.ShapeAnswer{}, nil
			}),
			bus.Bind(api.ShaperPlan, func(_ context.Context, r *api.PlanRates) (*api.PlanRatesAnswer, error) {
				return &api.PlanRatesAnswer{}, nil
			}),
		}})
	}
}

func (f *fxStandIn) firewall(nc *nats.Conn) func(context.Context) error {
	return func(ctx context.Context) error {
		return bus.Run(ctx, nc, bus.ServiceConfig{Name: "firewall", Version: "0.0.0", Log: benchLog, Endpoints: []bus.Endpoint{
			bus.Bind(api.FirewallBlocks, func(_ context.Context, r *api.BlockPageRequest) (*api.BlockPage, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				x, next := page(f.blocks, r.After, r.Limit)
				return &api.BlockPage{Count: len(x), Blocks: x, Next: next}, nil
			}),
			bus.Bind(api.FirewallBlock, func(_ context.Context, x *api.Block) (*api.BlockAnswer, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.blocks[x.ID] = *x
				return &api.BlockAnswer{}, nil
			}),
			bus.Bind(api.FirewallUnblock, func(_ context.Context, r *api.BlockRef) (*api.BlockAnswer, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				delete(f.blocks, r.ID)
				return &api.BlockAnswer{}, nil
			}),
		}})
	}
}

// peak is, while something ran, the highest heap in use (live and garbage
// not yet collected: what the process holds of the OS), the highest live
// heap (what the last collection found reachable: what the work needs),
// both above what they were before, and the highest resident set size
// of the process.
type peak struct{ heap, live, rss float64 }

func (p peak) max(q peak) peak {
	return peak{max(p.heap, q.heap), max(p.live, q.live), max(p.rss, q.rss)}
}

// measurePeak runs f sampling every 5 ms. With ROUTERD_BENCH_HEAPPROFILE
// set, the heap profile at the highest heap seen (at most every 200 ms)
// is written to that path with the phase's name appended; with
// ROUTERD_BENCH_CPUPROFILE set, the CPU profile of the phase alone (the
// whole benchmark's -cpuprofile is mostly the clients' loading), not
// with -cpuprofile; with ROUTERD_BENCH_TRACE, its execution trace.
func measurePeak(phase string, f func()) peak {
	profile := os.Getenv("ROUTERD_BENCH_HEAPPROFILE")
	if cpu := os.Getenv("ROUTERD_BENCH_CPUPROFILE"); cpu != "" {
		if out, err := os.Create(cpu + "." + phase); err == nil {
			defer out.Close()
			if pprof.StartCPUProfile(out) == nil {
				defer pprof.StopCPUProfile()
			}
		}
		// What the phase allocated: the allocs profile after it, with
		// the one before as its -base.
		allocs := func(when string) {
			if out, err := os.Create(cpu + "." + phase + ".allocs-" + when); err == nil {
				pprof.Lookup("allocs").WriteTo(out, 0)
				out.Close()
			}
		}
		allocs("before")
		defer allocs("after")
	}
	if tr := os.Getenv("ROUTERD_BENCH_TRACE"); tr != "" {
		if out, err := os.Create(tr + "." + phase); err == nil {
			defer out.Close()
			if trace.Start(out) == nil {
				defer trace.Stop()
			}
		}
	}
	var written time.Time
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	before := m.HeapInuse
	liveNow := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	liveBefore := liveNow()
	var heap, live, rss atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var s runtime.MemStats
		for {
			runtime.ReadMemStats(&s)
			if s.HeapInuse > heap.Load() {
				heap.Store(s.HeapInuse)
				if profile != "" && time.Since(written) > 200*time.Millisecond {
					if out, err := os.Create(profile + "." + phase); err == nil {
						pprof.Lookup("heap").WriteTo(out, 0)
						out.Close()
						written = time.Now()
					}
				}
			}
			if l := liveNow(); l > live.Load() {
				live.Store(l)
			}
			if r := residentBytes(); r > rss.Load() {
				rss.Store(r)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	<-sampled
	p := peak{rss: float64(rss.Load())}
	if h := heap.Load(); h > before {
		p.heap = float64(h - before)
	}
	if l := live.Load(); l > liveBefore {
		p.live = float64(l - liveBefore)
	}
	return p
}

// residentBytes is the process's resident set size (/proc/self/statm).
func residentBytes() uint64 {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// storeFloor is the near-limit of the restore into the emptied router:
// the keys it wrote under prefixes, read back, removed, and written again
// by bare transactions of as many operations, as many in flight as
// store.Replace keeps (no document read, nothing checked or compared),
// into the same store with the same watcher (the DHCP engine following
// its reservations). It returns the seconds the writes took.
func storeFloor(b *testing.B, ctx context.Context, kv *clientv3.Client, prefixes ...string) float64 {
	b.Helper()
	var kvs []*mvccpb.KeyValue
	var dels []clientv3.Op
	for _, p := range prefixes {
		g, err := kv.Get(ctx, p, clientv3.WithPrefix())
		if err != nil {
			b.Fatal(err)
		}
		kvs = append(kvs, g.Kvs...)
		dels = append(dels, clientv3.OpDelete(p, clientv3.WithPrefix()))
	}
	if _, err := kv.Txn(ctx).Then(dels...).Commit(); err != nil {
		b.Fatal(err)
	}
	per := store.TxnOps()
	var batches [][]clientv3.Op
	var ops []clientv3.Op
	size := 0
	for _, x := range kvs {
		if len(ops) == per || size+len(x.Key)+len(x.Value) > store.MaxTxnBytes {
			batches, ops, size = append(batches, ops), nil, 0
		}
		ops = append(ops, clientv3.OpPut(string(x.Key), string(x.Value)))
		size += len(x.Key) + len(x.Value) + 16
	}
	batches = append(batches, ops)
	work := make(chan []clientv3.Op)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	t0 := time.Now()
	for range max(store.ReplaceWorkers*store.MaxTxnOps/per, 2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ops := range work {
				if _, err := kv.Txn(ctx).Then(ops...).Commit(); err != nil {
					failed.Store(&err)
				}
			}
		}()
	}
	for _, ops := range batches {
		work <- ops
	}
	close(work)
	wg.Wait()
	took := time.Since(t0).Seconds()
	if e := failed.Load(); e != nil {
		b.Fatal(*e)
	}
	b.Logf("near-limit: %d keys in %d transactions in %.2f s", len(kvs), len(batches), took)
	return took
}
