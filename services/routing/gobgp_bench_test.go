package routing_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	gapi "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
	"google.golang.org/protobuf/types/known/anypb"

	"routerd.dev/proto/api"
	"routerd.dev/shared/testenv"
)

// benchRoutes is ROUTERD_BENCH_ROUTES, 100,000 unless set (1000000 for a
// full table).
func benchRoutes() int {
	if v, err := strconv.Atoi(os.Getenv("ROUTERD_BENCH_ROUTES")); err == nil && v > 0 {
		return v
	}
	return 100_000
}

// originateMany makes g send n IPv4 /24s (1.0.0.0/24 upwards, skipping
// 10/8, 100/8 and 127/8) with next hop nh, origin AS 64496 behind it.
func originateMany(b testing.TB, g *server.BgpServer, n int, nh string) time.Duration {
	b.Helper()
	t0 := time.Now()
	origin, _ := anypb.New(&gapi.OriginAttribute{Origin: 0})
	next, _ := anypb.New(&gapi.NextHopAttribute{NextHop: nh})
	path, _ := anypb.New(&gapi.AsPathAttribute{Segments: []*gapi.AsSegment{{Type: 2, Numbers: []uint32{64496}}}})
	attrs := []*anypb.Any{origin, next, path}
	for i, k := 0, 0; k < n; i++ {
		a, c := 1+i>>16, (i>>8)&255
		if a == 10 || a == 100 || a == 127 {
			continue
		}
		nlri, _ := anypb.New(&gapi.IPAddressPrefix{Prefix: fmt.Sprintf("%d.%d.%d.0", a, c, i&255), PrefixLen: 24})
		if _, err := g.AddPath(context.Background(), &gapi.AddPathRequest{TableType: gapi.TableType_GLOBAL,
			Path: &gapi.Path{Family: famV4, Nlri: nlri, Pattrs: attrs}}); err != nil {
			b.Fatalf("gobgp add path: %v", err)
		}
		k++
	}
	return time.Since(t0)
}

func p50(lat []time.Duration) time.Duration {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2]
}

func rssMB(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkGobgpFullTable: a gobgp upstream (in-process, in the uplink
// namespace) sends ROUTERD_BENCH_ROUTES IPv4 /24s (default 100,000) to
// the service's BIRD as a full-table peer (sub-benchmark bird), and the
// same table from a second gobgp to a gobgp receiver (sub-benchmark
// gobgp, the reference; over loopback on a free port, both in this
// process). Reported: time until all are received (bird: and installed
// in the kernel), the receiver's memory (BIRD's RSS; gobgp's Go heap
// growth after GC), and the latency of asking for the peers while the
// table is held (GET /bgp through the service; gobgp's ListPeer). One run
// per invocation:
//
//	go test -run '^$' -bench GobgpFullTable -benchtime 1x ./services/routing/
//	ROUTERD_BENCH_ROUTES=1000000 go test -run '^$' -bench GobgpFullTable -benchtime 1x -timeout 30m ./services/routing/
func BenchmarkGobgpFullTable(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: network namespaces")
	}
	n := benchRoutes()
	b.Run("bird", func(b *testing.B) {
		needBird(b)
		r, u := testenv.Netns(b), testenv.Netns(b)
		link(b, r, u)
		g := startGobgp(b, u, 65000, "198.18.0.1", "198.18.0.1")
		g.neighbor(b, "198.18.0.2", 65010, "", famV4)
		gen := originateMany(b, g.s, n, "198.18.0.1")

		env := testenv.Start(b)
		dir := b.TempDir()
		start(b, env, r, dir, time.Minute)
		call(b, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
		call(b, env, api.BGPPeerAddOp, map[string]any{"name": "transit", "ip": "198.18.0.1", "asn": 65000, "routes": "full"}, 200)
		raw, _ := os.ReadFile(filepath.Join(dir, "bird.pid"))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
		rss0 := rssMB(pid)
		b.ResetTimer()
		t0 := time.Now()
		call(b, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
		call(b, env, api.BGPConfirmOp, nil, 200)
		// From Established: BIRD waits its connect delay (5 s) before the
		// first attempt, which says nothing about the table.
		var t1 time.Time
		testenv.Eventually(b, time.Minute, func() error {
			if p := peerOf(b, call(b, env, api.BGPGet, nil, 200), "transit"); p["state"] != "Established" {
				return fmt.Errorf("peer %v", p["state"])
			}
			t1 = time.Now()
			return nil
		})
		testenv.Eventually(b, 20*time.Minute, func() error {
			p := peerOf(b, call(b, env, api.BGPGet, nil, 200), "transit")
			if got := p["received"].(float64); int(got) < n {
				return fmt.Errorf("received %v of %d", got, n)
			}
			return nil
		})
		received := time.Since(t1)
		var kernel int
		testenv.Eventually(b, 20*time.Minute, func() error {
			out := testenv.Run(b, r, "sh", "-c", "ip -4 route show proto bird | wc -l")
			kernel, _ = strconv.Atoi(strings.TrimSpace(out))
			if kernel < n {
				return fmt.Errorf("kernel has %d of %d", kernel, n)
			}
			return nil
		})
		installed := time.Since(t1)
		b.StopTimer()
		rss := rssMB(pid)
		var lat []time.Duration
		for i := 0; i < 20; i++ {
			t := time.Now()
			call(b, env, api.BGPGet, nil, 200)
			lat = append(lat, time.Since(t))
		}
		b.ReportMetric(received.Seconds(), "s-received")
		b.ReportMetric(installed.Seconds(), "s-installed")
		b.ReportMetric(rss, "MB-rss")
		b.ReportMetric(float64(p50(lat).Microseconds())/1000, "ms-peers-p50")
		b.ReportMetric(t1.Sub(t0).Seconds(), "s-session")
		b.Logf("bird: %d routes (generated by gobgp in %s): session up %s after enable; from then received in %s, in the kernel (%d) in %s; BIRD RSS %.1f MB (%.1f MB empty); GET /bgp p50 %s\n%s",
			n, gen.Round(time.Millisecond), t1.Sub(t0).Round(time.Millisecond), received.Round(time.Millisecond), kernel, installed.Round(time.Millisecond), rss, rss0,
			p50(lat), birdShow(b, filepath.Join(dir, "bird.ctl"), "show memory"))
	})
	b.Run("gobgp", func(b *testing.B) {
		port := freePort(b, "127.0.0.2")
		recv := server.NewBgpServer(server.LoggerOption(quiet{}))
		go recv.Serve()
		if err := recv.StartBgp(context.Background(), &gapi.StartBgpRequest{Global: &gapi.Global{
			Asn: 65010, RouterId: "198.18.0.2", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.2"}}}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(recv.Stop)
		if err := recv.AddPeer(context.Background(), &gapi.AddPeerRequest{Peer: &gapi.Peer{
			Conf:      &gapi.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 65000},
			Transport: &gapi.Transport{PassiveMode: true},
			AfiSafis:  []*gapi.AfiSafi{{Config: &gapi.AfiSafiConfig{Family: famV4, Enabled: true}}},
		}}); err != nil {
			b.Fatal(err)
		}
		send := server.NewBgpServer(server.LoggerOption(quiet{}))
		go send.Serve()
		if err := send.StartBgp(context.Background(), &gapi.StartBgpRequest{Global: &gapi.Global{
			Asn: 65000, RouterId: "198.18.0.1", ListenPort: -1}}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(send.Stop)
		gen := originateMany(b, send, n, "127.0.0.1")
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)

		b.ResetTimer()
		t0 := time.Now()
		if err := send.AddPeer(context.Background(), &gapi.AddPeerRequest{Peer: &gapi.Peer{
			Conf:      &gapi.PeerConf{NeighborAddress: "127.0.0.2", PeerAsn: 65010},
			Transport: &gapi.Transport{LocalAddress: "127.0.0.1", RemotePort: uint32(port)},
			AfiSafis:  []*gapi.AfiSafi{{Config: &gapi.AfiSafiConfig{Family: famV4, Enabled: true}}},
		}}); err != nil {
			b.Fatal(err)
		}
		// adv asks for the advertised counts too, as GET /bgp's sent.
		peers := func(adv bool) (uint64, gapi.PeerState_SessionState) {
			var got uint64
			st := gapi.PeerState_UNKNOWN
			_ = recv.ListPeer(context.Background(), &gapi.ListPeerRequest{Address: "127.0.0.1", EnableAdvertised: adv}, func(p *gapi.Peer) {
				st = p.State.SessionState
				for _, af := range p.AfiSafis {
					if af.State != nil {
						got += af.State.Accepted
					}
				}
			})
			return got, st
		}
		var t1 time.Time
		testenv.Eventually(b, time.Minute, func() error {
			if _, st := peers(false); st != gapi.PeerState_ESTABLISHED {
				return fmt.Errorf("peer %v", st)
			}
			t1 = time.Now()
			return nil
		})
		testenv.Eventually(b, 20*time.Minute, func() error {
			if got, _ := peers(false); int(got) < n {
				return fmt.Errorf("gobgp received %d of %d", got, n)
			}
			return nil
		})
		received := time.Since(t1)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&m1)
		var lat, latNoAdv []time.Duration
		for i := 0; i < 20; i++ {
			t := time.Now()
			peers(true)
			lat = append(lat, time.Since(t))
			t = time.Now()
			peers(false)
			latNoAdv = append(latNoAdv, time.Since(t))
		}
		heap := (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / (1 << 20)
		b.ReportMetric(t1.Sub(t0).Seconds(), "s-session")
		b.ReportMetric(received.Seconds(), "s-received")
		b.ReportMetric(heap, "MB-heap")
		b.ReportMetric(float64(p50(lat).Microseconds())/1000, "ms-peers-p50")
		b.ReportMetric(float64(p50(latNoAdv).Microseconds())/1000, "ms-peers-noadv-p50")
		b.Logf("gobgp (reference): %d routes (generated in %s): session up %s after the peer was added; from then received in %s; receiver's heap +%.1f MB; ListPeer p50 %s with advertised counts, %s without; no kernel routes (gobgp installs none)",
			n, gen.Round(time.Millisecond), t1.Sub(t0).Round(time.Millisecond), received.Round(time.Millisecond), heap, p50(lat), p50(latNoAdv))
	})
}

func freePort(b testing.TB, host string) int {
	b.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
