// Package bench measures the platform: requests through the gateway and
// the bus against the same service handler called directly, so the cost of
// each hop is a measured ratio. Run with `make bench`.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/firewall"
	"routerd.dev/services/netcfg"
	"routerd.dev/services/subscribers"
	"routerd.dev/services/system"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

const key = "bench-key"

// benchLog formats every line as routerd's own log does (text, info level)
// but throws it away: the cost measured is routerd's, not testing.B's
// (whose Log records the caller of every line).
var benchLog = slog.New(slog.NewTextHandler(benchLogOut(), &slog.HandlerOptions{Level: slog.LevelInfo}))

type platform struct {
	env      *testenv.Env
	url      string
	handlers map[string]bus.Handler
}

// setup runs subscribers, system, netcfg and firewall (the last two in a
// namespace, as root) on an in-process bus and an embedded etcd, with the
// gateway on a loopback port.
func setup(b *testing.B) *platform {
	b.Helper()
	env := testenv.Start(b)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	p := &platform{env: env, handlers: map[string]bus.Handler{}}
	add := func(eps []bus.Endpoint, run func(context.Context) error) {
		for _, e := range eps {
			p.handlers[e.Subject] = e.Handler
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	sub := subscribers.New(subscribers.Deps{NC: env.NC, KV: env.KV, Log: benchLog})
	add(sub.Endpoints(), sub.Run)
	sys := system.New(system.Deps{NC: env.NC, Log: benchLog})
	add(sys.Endpoints(), sys.Run)
	ns := testenv.Netns(b)
	nc, err := netcfg.New(netcfg.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: benchLog})
	if err != nil {
		b.Fatal(err)
	}
	add(nc.Endpoints(), nc.Run)
	// GET /status asks the firewall too: without it every status would
	// wait out the bus's grace for a service that is (re)starting.
	fw, err := firewall.New(firewall.Deps{NC: env.NC, KV: env.KV, NS: ns, Log: benchLog})
	if err != nil {
		b.Fatal(err)
	}
	add(fw.Endpoints(), fw.Run)

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
	p.url = "http://" + l.Addr().String()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, subscribers.Name, system.Name, netcfg.Name, firewall.Name); missing != nil {
		b.Fatalf("services never registered: %v", missing)
	}
	return p
}

// latencies records each operation and reports p50/p99 in microseconds.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) time(f func()) {
	t := time.Now()
	f()
	e := time.Since(t)
	l.mu.Lock()
	l.d = append(l.d, e)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	pct := func(p float64) float64 { return float64(l.d[int(p*float64(len(l.d)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(len(l.d))/b.Elapsed().Seconds(), "req/s")
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func (p *platform) http(b *testing.B, method, path, body string) {
	req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	drain(b, resp, method+" "+path)
}

// drain reads an answer whole, as a client does, and fails b on a status
// of 300 or more.
func drain(b *testing.B, resp *http.Response, what string) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		b.Fatalf("%s: %d", what, resp.StatusCode)
	}
}

func (p *platform) bus(b *testing.B, subject, method, body string) {
	rep, err := bus.Call(context.Background(), p.env.NC, subject, &pb.Request{Method: method, Args: json.RawMessage(body), Caller: "127.0.0.1"})
	if err != nil || rep.Status >= 300 {
		b.Fatalf("%s: %v %v", subject, err, rep)
	}
}

func (p *platform) direct(b *testing.B, subject, method, body string) {
	status, out, err := p.handlers[subject](context.Background(), &pb.Request{Method: method, Args: json.RawMessage(body), Caller: "127.0.0.1"})
	if err != nil || status >= 300 {
		b.Fatalf("%s: %d %v", subject, status, err)
	}
	// Encode as the bus adapter would, so only the hop differs.
	if _, err := json.Marshal(out); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStatus is GET /status through HTTP+gateway+bus, through the bus
// alone, and its handler called directly (which itself asks two services).
func BenchmarkStatus(b *testing.B) {
	p := setup(b)
	for _, mode := range []string{"direct", "bus", "gateway", "gateway-raw"} {
		b.Run(mode, func(b *testing.B) {
			var l latencies
			raw := newRawClient(b, p.url)
			for i := 0; i < b.N; i++ {
				l.time(func() {
					switch mode {
					case "gateway-raw":
						raw.do(b, "GET", "/status", "")
					case "direct":
						p.direct(b, api.StatusGet.Subject(), "GET", "{}")
					case "bus":
						p.bus(b, api.StatusGet.Subject(), "GET", "{}")
					default:
						p.http(b, "GET", "/status", "")
					}
				})
			}
			l.report(b)
		})
	}
	b.Run("gateway-parallel", func(b *testing.B) {
		var l latencies
		b.SetParallelism(8) // 16 clients on two cores
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.time(func() { p.http(b, "GET", "/status", "") })
			}
		})
		l.report(b)
	})
	// The handler ran inside micro's request handling: $SRV.STATS shows
	// the time it took.
	n, busy := stats(b, p, "system")
	if n == 0 || busy == 0 {
		b.Fatalf("$SRV.STATS.system: %d requests, %v processing; want both non-zero", n, busy)
	}
	b.Logf("$SRV.STATS.system: %d requests, %v processing, %v average", n, busy, busy/time.Duration(n))
}

// stats sums an service's endpoints' micro statistics.
func stats(b *testing.B, p *platform, service string) (n int, busy time.Duration) {
	msg, err := p.env.NC.Request("$SRV.STATS."+service, nil, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		b.Fatal(err)
	}
	for _, ep := range st.Endpoints {
		n += ep.NumRequests
		busy += ep.ProcessingTime
	}
	return n, busy
}

// BenchmarkPlanPair is POST /plans then DELETE /plans/{name}: two etcd
// transactions each, the path every billing change takes.
func BenchmarkPlanPair(b *testing.B) {
	p := setup(b)
	for _, mode := range []string{"direct", "bus", "gateway", "gateway-raw"} {
		b.Run(mode, func(b *testing.B) {
			var l latencies
			raw := newRawClient(b, p.url)
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("bench%d", i)
				put := fmt.Sprintf(`{"name":%q,"down_mbps":100,"up_mbps":20}`, name)
				del := fmt.Sprintf(`{"name":%q}`, name)
				l.time(func() {
					switch mode {
					case "gateway-raw":
						raw.do(b, "POST", "/plans", put)
						raw.do(b, "DELETE", "/plans/"+name, "")
					case "direct":
						p.direct(b, api.PlansPut.Subject(), "POST", put)
						p.direct(b, api.PlansDelete.Subject(), "DELETE", del)
					case "bus":
						p.bus(b, api.PlansPut.Subject(), "POST", put)
						p.bus(b, api.PlansDelete.Subject(), "DELETE", del)
					default:
						p.http(b, "POST", "/plans", put)
						p.http(b, "DELETE", "/plans/"+name, "")
					}
				})
			}
			l.report(b)
		})
	}
}

// benchLogOut is where the services' log goes: nowhere, unless
// ROUTERD_BENCH_LOG=1 (to see why a run failed).
func benchLogOut() io.Writer {
	if os.Getenv("ROUTERD_BENCH_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
