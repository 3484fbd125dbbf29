package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/system"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// BenchmarkBackupRestore: GET /backup and POST /restore of a router with
// 1,000 and 100,000 subscribers' reservations (one etcd key each, as the
// API stores them), through the gateway, with the real dhcp and system
// services: the archive's size, the time of each, and the peak
// heap of the process (every service, the bus and the gateway run in it;
// etcd is the test's) above what it used before. The restore brings the
// archive's documents back over the running configuration: the running
// one saved first as the undo version, then every reservation written
// again (100 per etcd transaction) and the engine reloaded.
//
//	go test -run '^$' -bench BackupRestore -benchtime 1x ./integration/bench/
func BenchmarkBackupRestore(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the dhcp service serves an interface in a namespace")
	}
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) { benchBackupRestore(b, n) })
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
	testenv.Run(b, ns, "ip", "link", "add", "bk0", "type", "veth", "peer", "name", "bk1")
	testenv.Run(b, ns, "ip", "addr", "add", "10.100.0.1/14", "dev", "bk0")
	testenv.Run(b, ns, "ip", "link", "set", "bk0", "up")
	testenv.Run(b, ns, "ip", "link", "set", "bk1", "up")

	// The served network and n reservations, stored as the dhcp service
	// stores them.
	st := store.New(env.KV, dhcp.Name)
	cfg := config.Config{Networks: []config.Network{{Iface: "bk0", Gateway: netip.MustParseAddr("10.100.0.1"),
		Prefix: netip.MustParsePrefix("10.100.0.0/14"), Label: "bench"}}}
	if _, err := st.Txn().Put(st.Key(dhcp.ConfigDoc), cfg).Commit(ctx); err != nil {
		b.Fatal(err)
	}
	base := netip.MustParseAddr("10.100.1.0").As4()
	var wg sync.WaitGroup
	var werr atomic.Pointer[error]
	const batch = 100
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := w * batch; from < n; from += 4 * batch {
				txn := st.Txn()
				for i := from; i < min(from+batch, n); i++ {
					ip := base
					v := uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3]) + uint32(i)
					a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
					mac := fmt.Sprintf("02:42:%02X:%02X:%02X:%02X", byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
					txn.Put(st.Key(dhcp.ResvPrefix+"clients/"+mac), config.Client{MAC: mac, IP: a, Hostname: fmt.Sprintf("sub-%d", i)})
				}
				if _, err := txn.Commit(ctx); err != nil {
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

	d, err := dhcp.NewService(dhcp.ServiceDeps{NC: env.NC, KV: env.KV, NS: ns, Log: benchLog})
	if err != nil {
		b.Fatal(err)
	}
	// The subscribers service is left out: it would remove reservations
	// that belong to no client of its own, and these are written straight
	// into dhcp's keys.
	sys := system.New(system.Deps{NC: env.NC, KV: env.KV, Log: benchLog, StateDir: b.TempDir(),
		Owners: []api.ConfigOwner{api.DHCPConfig}})
	for _, run := range []func(context.Context) error{d.Run, sys.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	defer wg.Wait()
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	if missing := bus.WaitUp(wctx, env.NC, dhcp.Name, system.Name); missing != nil {
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

	file := filepath.Join(b.TempDir(), "backup.tar.gz")
	var backupS, restoreS, backupPeak, restorePeak float64
	var size int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var archive []byte
		backupPeak = max(backupPeak, peakHeap(func() {
			t0 := time.Now()
			resp, body := do("GET", "/backup", nil)
			backupS += time.Since(t0).Seconds()
			if resp.StatusCode != 200 {
				b.Fatalf("backup: %d %s", resp.StatusCode, body)
			}
			archive = body
		}))
		size = len(archive)
		if err := os.WriteFile(file, archive, 0o600); err != nil {
			b.Fatal(err)
		}
		restorePeak = max(restorePeak, peakHeap(func() {
			t0 := time.Now()
			resp, body := do("POST", "/restore", map[string]any{"file": file})
			restoreS += time.Since(t0).Seconds()
			if resp.StatusCode != 200 {
				b.Fatalf("restore: %d %s", resp.StatusCode, body)
			}
		}))
	}
	b.StopTimer()
	b.ReportMetric(float64(size)/1e6, "archive-MB")
	b.ReportMetric(backupS/float64(b.N), "backup-s")
	b.ReportMetric(restoreS/float64(b.N), "restore-s")
	b.ReportMetric(backupPeak/1e6, "backup-peak-heap-MB")
	b.ReportMetric(restorePeak/1e6, "restore-peak-heap-MB")
}

// peakHeap runs f and returns the highest heap in use while it ran, above
// the heap in use just before (sampled every 5 ms).
func peakHeap(f func()) float64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	before := m.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var s runtime.MemStats
		for {
			runtime.ReadMemStats(&s)
			if s.HeapInuse > peak.Load() {
				peak.Store(s.HeapInuse)
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
	if p := peak.Load(); p > before {
		return float64(p - before)
	}
	return 0
}
