package system

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"routerd.dev/proto/event"
)

// recentEvents reads up to max events on subject from the event stream,
// published within the last `since`, oldest first: an ordered consumer, so
// nothing is left behind on the server.
func recentEvents(ctx context.Context, nc *nats.Conn, subject string, since time.Duration, max int) ([]event.Event, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	start := time.Now().Add(-since)
	c, err := js.OrderedConsumer(ctx, event.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start,
	})
	if err != nil {
		return nil, err
	}
	var out []event.Event
	for len(out) < max {
		batch, err := c.Fetch(min(100, max-len(out)), jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			return out, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var e event.Event
			if json.Unmarshal(m.Data(), &e) == nil {
				out = append(out, e)
			}
		}
		if n == 0 || ctx.Err() != nil {
			break
		}
	}
	return out, nil
}
