package dhcp

import (
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"routerd.dev/shared/netns"
)

// TestShedStaleRequests: a request that waited in the socket queue longer
// than maxQueueAge (the kernel's receive timestamp says how long) is
// dropped unanswered, and counted; a fresh one is handed on.
func TestShedStaleRequests(t *testing.T) {
	needRoot(t)
	tp := newTopo(t)
	ns := tp.target(t)
	s, err := listenUDP(ns, false, tp.srvIf, 6767)
	if err != nil {
		t.Fatal(err)
	}
	defer s.release()
	must(t, "ip", "-n", tp.cli, "addr", "add", "10.77.0.9/24", "dev", tp.cliIf)
	cli, err := netns.Open("/var/run/netns/" + tp.cli)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
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
	time.Sleep(maxQueueAge + 200*time.Millisecond)
	send("new")

	l := &listener{iface: tp.srvIf, sock: s, log: slog.Default()}
	var got []string
	go func() {
		time.Sleep(300 * time.Millisecond)
		s.close()
	}()
	l.receive(1500, func(b []byte, src netip.AddrPort, _ *outBatch) {
		got = append(got, string(b))
		if !src.Addr().Is4() || src.Addr() != netip.MustParseAddr("10.77.0.9") {
			t.Errorf("source %v, want 10.77.0.9", src)
		}
	})
	if len(got) != 1 || got[0] != "new" || l.shed.Load() != 1 {
		t.Errorf("handed on %q, shed %d; want only \"new\" and one shed", got, l.shed.Load())
	}
}
