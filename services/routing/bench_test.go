package routing_test

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/testenv"
)

// BenchmarkFullTable: an upstream BIRD sends ROUTERD_BENCH_ROUTES (default
// 100,000) IPv4 /24s to the service's BIRD as a full-table peer; reported:
// time until GET /bgp shows them all received, BIRD's memory, the kernel's
// route count, and GET /bgp's latency while BIRD holds the table. One run
// per invocation (the scenario is the measurement):
//
//	go test -run '^$' -bench FullTable -benchtime 1x ./services/routing/
func BenchmarkFullTable(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: network namespaces")
	}
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("ROUTERD_BENCH_ROUTES")); err == nil && v > 0 {
		n = v
	}
	r, u := testenv.Netns(b), testenv.Netns(b)
	link(b, r, u)
	var cfg strings.Builder
	cfg.WriteString("router id 198.18.0.1;\nprotocol device {}\nprotocol static st { ipv4;\n")
	for i, k := 0, 0; k < n; i++ {
		a, c := 1+i>>16, (i>>8)&255 // 1.0.0.0/24 upwards, skipping 10/8 and 100/8 at most
		if a == 10 || a == 100 || a == 127 {
			continue
		}
		fmt.Fprintf(&cfg, "route %d.%d.%d.0/24 blackhole;\n", a, c, i&255)
		k++
	}
	cfg.WriteString("}\nprotocol bgp customer { local as 65000; neighbor 198.18.0.2 as 65010; direct; ipv4 { import none; export all; }; }\n")
	peerBirdWith(b, u, cfg.String())

	env := testenv.Start(b)
	dir := b.TempDir()
	start(b, env, r, dir, time.Minute)
	call(b, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
	call(b, env, api.BGPPeerAddOp, map[string]any{"name": "transit", "ip": "198.18.0.1", "asn": 65000, "routes": "full"}, 200)
	b.ResetTimer()
	t0 := time.Now()
	call(b, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
	call(b, env, api.BGPConfirmOp, nil, 200)
	testenv.Eventually(b, 10*time.Minute, func() error {
		p := peerOf(b, call(b, env, api.BGPGet, nil, 200), "transit")
		if got := p["received"].(float64); int(got) < n {
			return fmt.Errorf("received %v of %d", got, n)
		}
		return nil
	})
	converge := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(converge.Seconds(), "s-converge")

	mem := birdShow(b, dir+"/bird.ctl", "show memory")
	for _, l := range strings.Split(mem, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "Total:" {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				scale := map[string]float64{"kB": 1.0 / 1024, "MB": 1, "GB": 1024}[f[2]]
				b.ReportMetric(v*scale, "MB-bird")
			}
		}
	}
	var lat []time.Duration
	for i := 0; i < 20; i++ {
		t := time.Now()
		call(b, env, api.BGPGet, nil, 200)
		lat = append(lat, time.Since(t))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-GET/bgp-p50")
	kernel := testenv.Run(b, r, "sh", "-c", "ip -4 route show proto bird | wc -l")
	if k, err := strconv.Atoi(strings.TrimSpace(kernel)); err == nil {
		b.ReportMetric(float64(k), "kernel-routes")
	}
	b.Logf("%d routes: converged in %s, GET /bgp p50 %s, kernel routes from BIRD %s\n%s", n, converge.Round(time.Millisecond),
		lat[len(lat)/2], strings.TrimSpace(kernel), mem)
}
