package dhcp

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/testenv"
)

// TestKernelReconfigure: an invalid configuration is refused whole and the
// previous one stays; dropping the IPv6 network closes its listeners but
// leaves the IPv4 listener (same socket) and every lease alone; events are
// published for grant and unknown devices.
func TestKernelReconfigure(t *testing.T) {
	t.Parallel() // own namespaces and keyspace; mostly waits on clients and timers
	needRoot(t, "udhcpc")
	tp := newTopo(t)
	cfg := kernelConfig(tp)
	h := newHarness(t, tp, cfg)
	hook, _ := tp.script(t)
	tp.setMAC(t, "02:aa:00:00:00:20")
	if out, err := tp.client(t, 30*time.Second, "udhcpc", "-i", tp.cliIf, "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", hook); err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, out)
	}
	l := h.waitLease("udhcpc", func(l lease.Lease) bool { return l.MAC == "02:AA:00:00:00:20" })

	bad := cfg
	bad.Lifetimes6.Valid = 60 * time.Second // below the spec's 120 s
	bad.Clients = append(bad.Clients, cfg.Clients[0])
	err := h.eng.Reconfigure(bad)
	if err == nil || !strings.Contains(err.Error(), "valid") || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("invalid configuration: err = %v, want both problems reported", err)
	}
	if got := h.eng.Config().Lifetimes6.Valid; got == 60*time.Second {
		t.Fatalf("refused configuration was applied")
	}

	h.eng.mu.Lock()
	v4sock := h.eng.listeners["4|"+tp.srvIf]
	h.eng.mu.Unlock()
	next := cfg
	next.Networks6 = nil
	next.PD = next.PD.WithoutSlices()
	next.Networks[0].LeaseTime = 2 * time.Hour
	if err := h.eng.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	// Closing is asynchronous: wait (bounded) for the v6 listener to go;
	// the checks below tell what is wrong if it does not.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	testenv.Poll(ctx, func() error {
		h.eng.mu.Lock()
		defer h.eng.mu.Unlock()
		if _, v6 := h.eng.listeners["6|"+tp.srvIf]; v6 {
			return errors.New("v6 listener open")
		}
		return nil
	})
	cancel()
	h.eng.mu.Lock()
	_, v6 := h.eng.listeners["6|"+tp.srvIf]
	_, ra := h.eng.listeners["ra|"+tp.srvIf]
	same := h.eng.listeners["4|"+tp.srvIf] == v4sock
	h.eng.mu.Unlock()
	if v6 || ra || !same {
		t.Errorf("after dropping IPv6: v6 listener %v, ra %v, v4 listener kept %v", v6, ra, same)
	}
	if got, ok := h.eng.Lease(netip.PrefixFrom(l.Addr, 32)); !ok || got.MAC != l.MAC {
		t.Errorf("lease dropped by reconfiguration")
	}
	// The renewal is answered with the new lease time by the same socket.
	if out, err := tp.client(t, 30*time.Second, "udhcpc", "-i", tp.cliIf, "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", hook, "-r", l.Addr.String()); err != nil {
		t.Fatalf("udhcpc again: %v\n%s", err, out)
	}
	l2 := h.waitLease("renewed", func(x lease.Lease) bool { return x.MAC == l.MAC && x.End.Sub(x.Start) > 90*time.Minute })
	if l2.Addr != l.Addr {
		t.Errorf("address moved from %v to %v", l.Addr, l2.Addr)
	}

	var events []string
	for len(h.events.ch) > 0 {
		events = append(events, <-h.events.ch)
	}
	all := strings.Join(events, "\n")
	for _, want := range []string{"unknown_device " + l.Addr.String(), "lease_granted " + l.Addr.String()} {
		if !strings.Contains(all, want) {
			t.Errorf("events lack %q:\n%s", want, all)
		}
	}
}
