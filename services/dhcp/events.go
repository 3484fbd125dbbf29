package dhcp

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"routerd.dev/proto/event"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/bus"
)

// Event publishing defaults.
const (
	// DefaultEventBuffer bounds the events waiting for the bus. The engine
	// publishes on its answer path, so a full buffer drops (and counts)
	// rather than waits: a slow or absent bus never delays an answer.
	DefaultEventBuffer = 4096
	// DefaultUnknownDeviceWindow is the per-device limit of unknown_device:
	// at most one event per interface and MAC in this window. A CPE that
	// keeps retrying DISCOVER every few seconds shows up once a minute,
	// not twenty times.
	DefaultUnknownDeviceWindow = time.Minute
	// DefaultEventReport is how often dropped and suppressed counts are logged.
	DefaultEventReport = time.Minute
	// maxLimitedDevices bounds the per-device table (about 100 bytes an
	// entry). While it is full, new devices are suppressed until entries
	// older than the window are swept: a flood of random MACs costs the
	// bus nothing and the table at most a few MiB.
	maxLimitedDevices = 1 << 16
)

// eventKinds maps the engine's kinds onto the bus's event kinds, dotted like
// every other service's (plan.created, route.deleted), so a tap can take
// all lease events with router.events.dhcp.lease.>.
var eventKinds = map[string]string{
	"lease_granted":  event.LeaseGranted,
	"lease_renewed":  event.LeaseRenewed,
	"lease_released": event.LeaseReleased,
	"lease_declined": event.LeaseDeclined,
	"lease_expired":  event.LeaseExpired,
	"unknown_device": event.DeviceUnknown,
}

func busKind(kind string) string {
	if k, ok := eventKinds[kind]; ok {
		return k
	}
	return strings.ReplaceAll(kind, "_", ".")
}

// EventStats counts what happened to the engine's events.
type EventStats struct {
	// Published went out on the bus.
	Published uint64 `json:"published"`
	// Dropped found the buffer full (the bus did not keep up).
	Dropped uint64 `json:"dropped"`
	// Failed were refused by the bus connection (closed, or its reconnect
	// buffer full).
	Failed uint64 `json:"failed"`
	// UnknownDeviceSuppressed were unknown_device events within the
	// per-device window.
	UnknownDeviceSuppressed uint64 `json:"unknown_device_suppressed"`
}

// busEvents is the engine's Events on NATS: Publish only rate-limits and
// queues; Run, on its own goroutine, encodes and publishes.
type busEvents struct {
	pub    *bus.Publisher
	log    *slog.Logger
	now    func() time.Time
	window time.Duration
	report time.Duration
	ch     chan queuedEvent

	mu   sync.Mutex
	seen map[string]time.Time // "iface|mac" -> last unknown_device published

	published, dropped, failed, suppressed atomic.Uint64
}

type queuedEvent struct {
	kind string
	data any
}

func newBusEvents(pub *bus.Publisher, log *slog.Logger, now func() time.Time, buffer int, window, report time.Duration) *busEvents {
	if buffer <= 0 {
		buffer = DefaultEventBuffer
	}
	if window <= 0 {
		window = DefaultUnknownDeviceWindow
	}
	if report <= 0 {
		report = DefaultEventReport
	}
	return &busEvents{pub: pub, log: log, now: now, window: window, report: report,
		ch: make(chan queuedEvent, buffer), seen: map[string]time.Time{}}
}

// Publish implements Events. It never blocks.
func (b *busEvents) Publish(kind string, payload any) {
	if kind == "unknown_device" && !b.firstInWindow(payload) {
		b.suppressed.Add(1)
		return
	}
	select {
	case b.ch <- queuedEvent{kind, payload}:
	default:
		b.dropped.Add(1)
	}
}

// firstInWindow reports whether an unknown_device event for this device
// may go out now, and if so records that it did.
func (b *busEvents) firstInWindow(payload any) bool {
	var l *lease.Lease
	switch p := payload.(type) {
	case lease.Lease:
		l = &p
	case *lease.Lease:
		l = p
	default:
		return true
	}
	id := l.MAC
	if id == "" {
		id = l.ClientID + l.DUID
	}
	key := l.Iface + "|" + id
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	last, known := b.seen[key]
	switch {
	case known && now.Sub(last) < b.window:
		return false
	case !known && len(b.seen) >= maxLimitedDevices:
		return false
	}
	b.seen[key] = now
	return true
}

// sweep forgets devices whose window has passed.
func (b *busEvents) sweep() {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, t := range b.seen {
		if now.Sub(t) >= b.window {
			delete(b.seen, k)
		}
	}
}

// Stats returns the counters.
func (b *busEvents) Stats() EventStats {
	return EventStats{Published: b.published.Load(), Dropped: b.dropped.Load(), Failed: b.failed.Load(),
		UnknownDeviceSuppressed: b.suppressed.Load()}
}

// Run publishes queued events until ctx ends, then publishes what is still
// queued. It logs the dropped, failed and suppressed counts every report
// interval in which they grew.
func (b *busEvents) Run(ctx context.Context) {
	sweep := time.NewTicker(b.window)
	defer sweep.Stop()
	report := time.NewTicker(b.report)
	defer report.Stop()
	var last EventStats
	for {
		select {
		case <-ctx.Done():
			for {
				select {
				case ev := <-b.ch:
					b.send(ev)
				default:
					b.logCounts(&last)
					return
				}
			}
		case ev := <-b.ch:
			b.send(ev)
		case <-sweep.C:
			b.sweep()
		case <-report.C:
			b.logCounts(&last)
		}
	}
}

func (b *busEvents) send(ev queuedEvent) {
	if err := b.pub.Send(busKind(ev.kind), nil, ev.data); err != nil {
		if b.failed.Add(1) == 1 {
			b.log.Warn("dhcp events not published; counting further failures", "kind", ev.kind, "err", err)
		}
		return
	}
	b.published.Add(1)
}

func (b *busEvents) logCounts(last *EventStats) {
	now := b.Stats()
	if d := now.Dropped - last.Dropped; d > 0 {
		b.log.Warn("dhcp events dropped: the bus did not keep up", "dropped", d, "dropped_total", now.Dropped)
	}
	if d := now.Failed - last.Failed; d > 0 {
		b.log.Warn("dhcp events not published: bus connection refused them", "failed", d, "failed_total", now.Failed)
	}
	if d := now.UnknownDeviceSuppressed - last.UnknownDeviceSuppressed; d > 0 {
		b.log.Info("unknown_device events suppressed by the per-device limit", "suppressed", d,
			"suppressed_total", now.UnknownDeviceSuppressed, "window", b.window)
	}
	*last = now
}
