package dhcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"routerd.dev/proto/event"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// clock is an injected time source the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// natsBus is an embedded NATS server and a subscription to every dhcp event.
func natsBus(t *testing.T) (*nats.Conn, chan *nats.Msg) {
	t.Helper()
	nc := testenv.NATS(t)
	ch := make(chan *nats.Msg, 1024)
	if _, err := nc.ChanSubscribe(event.SubjectPrefix+"."+Name+".>", ch); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return nc, ch
}

// received waits until b has dealt with (published, dropped, failed or
// suppressed) all n events handed to its Publish, then returns the events
// that reached the bus. Nothing is left in flight then: nc.Flush is a round
// trip, and the server delivers to nc's subscription everything published
// before it answers.
func received(t *testing.T, b *busEvents, nc *nats.Conn, ch chan *nats.Msg, n uint64) []string {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, func() error {
		if st := b.Stats(); st.Published+st.Dropped+st.Failed+st.UnknownDeviceSuppressed < n {
			return fmt.Errorf("%d of %d events dealt with: %+v", st.Published+st.Dropped+st.Failed+st.UnknownDeviceSuppressed, n, st)
		}
		return nil
	})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		select {
		case m := <-ch:
			var ev event.Event
			var l lease.Lease
			_ = json.Unmarshal(m.Data, &ev)
			_ = json.Unmarshal(ev.Data, &l)
			out = append(out, fmt.Sprintf("%s %s %s %s", m.Subject, ev.Kind, l.Iface, l.MAC))
		default:
			return out
		}
	}
}

func runEvents(t *testing.T, b *busEvents) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func unknown(iface, mac string) lease.Lease {
	return lease.Lease{Kind: lease.V4, Iface: iface, MAC: mac, Addr: netip.MustParseAddr("10.77.0.100")}
}

// A device retrying DISCOVER every 3 s is published once a minute; other
// devices, the same MAC on another interface, and lease events are not
// held back by it.
func TestUnknownDeviceRateLimit(t *testing.T) {
	nc, ch := natsBus(t)
	clk := &clock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	b := newBusEvents(bus.NewPublisher(nc, Name, testenv.Log(t)), testenv.Log(t), clk.now, 64, time.Minute, time.Hour)
	runEvents(t, b)

	for i := 0; i < 20; i++ { // t0 .. t0+57s
		b.Publish("unknown_device", unknown("vlan100", "02:AA:00:00:00:01"))
		clk.add(3 * time.Second)
	}
	b.Publish("unknown_device", unknown("vlan100", "02:AA:00:00:00:01")) // t0+60s: a new window
	b.Publish("unknown_device", unknown("vlan100", "02:AA:00:00:00:02"))
	b.Publish("unknown_device", unknown("vlan200", "02:AA:00:00:00:01"))
	b.Publish("lease_granted", unknown("vlan100", "02:AA:00:00:00:01"))
	b.Publish("lease_granted", unknown("vlan100", "02:AA:00:00:00:01"))

	got := received(t, b, nc, ch, 20+5)
	want := []string{
		"router.events.dhcp.device.unknown device.unknown vlan100 02:AA:00:00:00:01",
		"router.events.dhcp.device.unknown device.unknown vlan100 02:AA:00:00:00:01",
		"router.events.dhcp.device.unknown device.unknown vlan100 02:AA:00:00:00:02",
		"router.events.dhcp.device.unknown device.unknown vlan200 02:AA:00:00:00:01",
		"router.events.dhcp.lease.granted lease.granted vlan100 02:AA:00:00:00:01",
		"router.events.dhcp.lease.granted lease.granted vlan100 02:AA:00:00:00:01",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events on the bus (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(EventStats{Published: 6, UnknownDeviceSuppressed: 19}, b.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// The per-device table is bounded: while it is full a new device is
// suppressed, and once the window has passed the sweep makes room.
func TestUnknownDeviceTableBounded(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	b := newBusEvents(nil, testenv.Log(t), clk.now, 1, time.Minute, time.Hour)
	for i := 0; i < maxLimitedDevices; i++ {
		if !b.firstInWindow(unknown("vlan100", fmt.Sprintf("02:00:00:%02X:%02X:%02X", i>>16, i>>8&0xff, i&0xff))) {
			t.Fatalf("device %d suppressed before the table was full", i)
		}
	}
	fresh := unknown("vlan100", "02:BB:00:00:00:01")
	if b.firstInWindow(fresh) {
		t.Fatal("a new device was let through with the table full")
	}
	clk.add(30 * time.Second)
	b.sweep()
	if b.firstInWindow(fresh) {
		t.Fatal("the sweep freed entries still inside their window")
	}
	clk.add(30 * time.Second)
	b.sweep()
	if got := len(b.seen); got != 0 {
		t.Fatalf("after the window the sweep left %d entries", got)
	}
	if !b.firstInWindow(fresh) {
		t.Fatal("a new device was suppressed after the sweep made room")
	}
}

// Publish never waits for the bus: with the buffer full it drops and
// counts; what was buffered still goes out.
func TestPublishNeverBlocks(t *testing.T) {
	nc, ch := natsBus(t)
	b := newBusEvents(bus.NewPublisher(nc, Name, testenv.Log(t)), testenv.Log(t), time.Now, 4, time.Minute, time.Hour)
	start := time.Now()
	for i := 0; i < 10; i++ {
		b.Publish("lease_renewed", unknown("vlan100", fmt.Sprintf("02:AA:00:00:00:%02X", i)))
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("10 publishes with nobody draining took %v", d)
	}
	if got := b.Stats().Dropped; got != 6 {
		t.Errorf("dropped %d, want 6", got)
	}
	runEvents(t, b)
	if got := len(received(t, b, nc, ch, 10)); got != 4 {
		t.Errorf("%d events reached the bus, want the 4 buffered", got)
	}
}
