package olt_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"routerd.dev/services/olt/sim"
)

// BenchmarkOLTFleet: 20 simulated OLTs (each on its own loopback address,
// as real OLTs have their own) answering each command after 50 ms; 200
// concurrent reads through the API (HTTP, gateway, bus, olt service),
// then 100 ONT additions with a plan spread over the 20 OLTs.
//
//	go test ./services/olt -run X -bench OLTFleet -benchtime 1x
func BenchmarkOLTFleet(b *testing.B) {
	const olts, latency, reads, adds = 20, 50 * time.Millisecond, 200, 100
	r := start(b)
	var fleet []*sim.Server
	for i := range olts {
		var found []sim.AutofindONT
		for j := range adds / olts {
			found = append(found, sim.AutofindONT{Port: "0/1/0", SN: fmt.Sprintf("48575443%04X%04X", i, j)})
		}
		srv, err := sim.Start(context.Background(), sim.Config{Addr: fmt.Sprintf("127.0.1.%d", i+1),
			OLTs: []sim.OLTConfig{{Name: fmt.Sprintf("OLT%d", i), User: simUser, Pass: simPass, Latency: latency, NoPaging: true, Autofind: found, LogCommands: true}}})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		fleet = append(fleet, srv)
		host, port, _ := net.SplitHostPort(srv.TelnetAddr())
		if a := r.do(b, "POST", "/olts", map[string]any{"name": fmt.Sprintf("olt%d", i), "host": host, "port": port, "user": simUser, "pass": simPass}, nil); a.status != 201 {
			b.Fatal(a.raw)
		}
	}
	if a := r.do(b, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 100, "up_mbps": 20}, nil); a.status != 201 {
		b.Fatal(a.raw)
	}
	for i := range olts { // each OLT's VLAN, and a warm session
		if a := r.do(b, "POST", "/olt/vlan-add", map[string]any{"olt": fmt.Sprintf("olt%d", i), "vlan": 100}, nil); a.status != 200 {
			b.Fatal(a.raw)
		}
	}
	b.ResetTimer()
	for range b.N {
		lat := make([]time.Duration, reads)
		var wg sync.WaitGroup
		begin := time.Now()
		for i := range reads {
			wg.Go(func() {
				t0 := time.Now()
				a := r.do(b, "POST", "/olt/onus", map[string]any{"olt": fmt.Sprintf("olt%d", i%olts), "port": "0/1/0"}, nil)
				lat[i] = time.Since(t0)
				if a.status != 200 {
					b.Error(a.raw)
				}
			})
		}
		wg.Wait()
		total := time.Since(begin)
		slices.Sort(lat)
		b.ReportMetric(float64(reads)/total.Seconds(), "reads/s")
		b.ReportMetric(float64(lat[reads/2].Milliseconds()), "read-p50-ms")
		b.ReportMetric(float64(lat[reads*99/100].Milliseconds()), "read-p99-ms")

		took := make([]time.Duration, adds)
		begin = time.Now()
		for i := range adds {
			wg.Go(func() {
				o := i % olts
				t0 := time.Now()
				a := r.do(b, "POST", "/olt/ont-add", map[string]any{"olt": fmt.Sprintf("olt%d", o), "port": "0/1/0",
					"sn": fmt.Sprintf("48575443%04X%04X", o, i/olts), "vlan": 100, "plan": "gold"}, nil)
				took[i] = time.Since(t0)
				if a.status != 200 {
					b.Error(a.raw)
				}
			})
		}
		wg.Wait()
		total = time.Since(begin)
		slices.Sort(took)
		b.ReportMetric(total.Seconds(), "adds-total-s")
		b.ReportMetric(float64(took[0].Milliseconds()), "add-min-ms")
		b.ReportMetric(float64(took[adds/2].Milliseconds()), "add-p50-ms")
		b.StopTimer()
		overlaps := 0
		for i, srv := range fleet {
			if n := len(srv.OLT(0).ONTs()); n != adds/olts {
				b.Errorf("olt%d has %d ONTs, want %d", i, n, adds/olts)
			}
			overlaps += writeOverlaps(b, srv.OLT(0).CommandLog(), begin)
		}
		// From the simulators' own logs: while one session is inside an
		// ont-add (its first changing command to its service-port), no
		// other session sent a changing command.
		b.ReportMetric(float64(overlaps), "write-overlaps")
		if overlaps > 0 {
			b.Errorf("%d changing commands of one OLT sent while another session's ont-add was in progress", overlaps)
		}
	}
}

// writeOverlaps counts changing commands sent while another session was
// inside an ont-add, in one OLT's command log from since on.
func writeOverlaps(b *testing.B, log []sim.CommandLog, since time.Time) int {
	reading := func(l string) bool {
		for _, p := range []string{"display", "enable", "config", "quit", "undo smart", "scroll", "screen-length"} {
			if strings.HasPrefix(l, p) {
				return true
			}
		}
		return false
	}
	owner, n, seen := 0, 0, 0
	for _, e := range log {
		if e.At.Before(since) || reading(e.Line) {
			continue
		}
		seen++
		switch {
		case owner == 0:
			owner = e.Session
		case owner != e.Session:
			n++
		}
		if strings.HasPrefix(e.Line, "service-port vlan") && owner == e.Session {
			owner = 0
		}
	}
	if seen == 0 {
		b.Error("no changing command in the log")
	}
	return n
}
