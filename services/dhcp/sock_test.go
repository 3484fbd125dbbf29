package dhcp

import (
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"routerd.dev/shared/testenv"
)

// TestShedStaleRequests: a request that waited in the socket queue longer
// than maxQueueAge (the kernel's receive timestamp says how long) is
// dropped unanswered, and counted; a fresh one is handed on.
func TestShedStaleRequests(t *testing.T) {
	t.Parallel() // own namespaces and keyspace; mostly waits on clients and timers
	needRoot(t)
	tp := newTopo(t)
	ns := tp.target(t)
	s, err := listenUDP(ns, false, tp.srvIf, 6767)
	if err != nil {
		t.Fatal(err)
	}
	defer s.release()
	testenv.Run(t, tp.cli, "ip", "addr", "add", "10.77.0.9/24", "dev", tp.cliIf)
	cli := tp.cli
	send := func(msg string) {
		t.Helper()
		err := cli.Do(func() error {
			c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 77, 0, 9)}, &net.UDPAddr{IP: net.IPv4(10, 77, 0, 1), Port: 6767})
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte(msg))
			return err
		})
		if err != nil {
			t.Fatalf("send %s: %v", msg, err)
		}
	}
	send("old")
	// The sleep is what is tested: "old" must age in the socket's queue.
	time.Sleep(maxQueueAge + 200*time.Millisecond)
	send("new")

	l := &listener{iface: tp.srvIf, sock: s, log: slog.Default()}
	var got []string
	// "new" was queued last, so once it is handed on both were dealt with
	// and receive may stop (after this batch); the timer stops it if "new"
	// never comes.
	stop := time.AfterFunc(5*time.Second, s.close)
	defer stop.Stop()
	l.receive(1500, func(b []byte, src netip.AddrPort, _ *outBatch) {
		got = append(got, string(b))
		if !src.Addr().Is4() || src.Addr() != netip.MustParseAddr("10.77.0.9") {
			t.Errorf("source %v, want 10.77.0.9", src)
		}
		if string(b) == "new" {
			s.close()
		}
	})
	if len(got) != 1 || got[0] != "new" || l.shed.Load() != 1 {
		t.Errorf("handed on %q, shed %d; want only \"new\" and one shed", got, l.shed.Load())
	}
}
