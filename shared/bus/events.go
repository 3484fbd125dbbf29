package bus

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
)

// Publisher publishes one service's events. Publishing is fire-and-forget on
// core NATS; the event stream captures the subject space, so a tap can
// replay without the publisher waiting for a JetStream acknowledgement.
type Publisher struct {
	nc      *nats.Conn
	service string
	log     *slog.Logger
	now     func() time.Time
}

// NewPublisher returns a publisher for service.
func NewPublisher(nc *nats.Conn, service string, log *slog.Logger) *Publisher {
	if log == nil {
		log = slog.Default()
	}
	return &Publisher{nc: nc, service: service, log: log, now: time.Now}
}

// Publish sends an event of kind; req (may be nil) says who caused it. A
// failure is logged, not returned: an event never fails the change it reports.
func (p *Publisher) Publish(kind string, req *pb.Request, data any) {
	if err := p.Send(kind, req, data); err != nil {
		p.log.Warn("event not published", "kind", kind, "err", err)
	}
}

// Send is Publish returning the failure instead of logging it, for
// publishers that count failures and report them in bulk (the DHCP engine
// publishes thousands of events a second; one log line each would drown
// the log while the bus is away).
func (p *Publisher) Send(kind string, req *pb.Request, data any) error {
	if p == nil || p.nc == nil {
		return nil
	}
	ev := event.Event{Time: p.now().UTC(), Service: p.service, Kind: kind}
	if req != nil {
		ev.Caller, ev.By, ev.RequestID = req.Caller, req.By, req.RequestID
	}
	if data != nil {
		raw, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("event %s not encodable: %w", kind, err)
		}
		ev.Data = raw
	}
	raw, _ := json.Marshal(&ev)
	return p.nc.Publish(event.Subject(p.service, kind), raw)
}
