package bus

import (
	"encoding/json"
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

// Publish sends an event of kind; req (may be nil) says who caused it.
func (p *Publisher) Publish(kind string, req *pb.Request, data any) {
	if p == nil || p.nc == nil {
		return
	}
	ev := event.Event{Time: p.now().UTC(), Service: p.service, Kind: kind}
	if req != nil {
		ev.Caller, ev.By, ev.RequestID = req.Caller, req.By, req.RequestID
	}
	if data != nil {
		raw, err := json.Marshal(data)
		if err != nil {
			p.log.Warn("event not encodable", "kind", kind, "err", err)
			return
		}
		ev.Data = raw
	}
	raw, _ := json.Marshal(&ev)
	if err := p.nc.Publish(event.Subject(p.service, kind), raw); err != nil {
		p.log.Warn("event not published", "kind", kind, "err", err)
	}
}
