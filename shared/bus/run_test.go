package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// Run serves the endpoints until its context ends and then takes the
// service off the bus: a caller gets the 503 of a subject nobody serves.
func TestRunServesUntilContextEnds(t *testing.T) {
	nc := testenv.NATS(t)
	const subject = "router.test.things.get"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- bus.Run(ctx, nc, bus.ServiceConfig{Name: "test", Version: "1.0.0", Endpoints: []bus.Endpoint{{
			Subject: subject,
			Handler: func(context.Context, *pb.Request) (int, any, error) {
				return http.StatusOK, map[string]int{"n": 1}, nil
			},
		}}})
	}()
	testenv.Eventually(t, 5*time.Second, func() error {
		rep, err := bus.Call(context.Background(), nc, subject, &pb.Request{Method: http.MethodGet})
		if err != nil {
			return err // not declared yet
		}
		if string(rep.Body) != `{"n":1}` {
			t.Fatalf("call while running: %+v", rep)
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	_, err := bus.Call(context.Background(), nc, subject, &pb.Request{Method: http.MethodGet})
	if ae := apierr.From(err); err == nil || ae.Status() != http.StatusServiceUnavailable {
		t.Fatalf("call after Run returned: %v, want a 503", err)
	}
}

// Send returns what Publish would log: a payload that cannot be encoded,
// or a connection that is gone.
func TestSendReportsFailures(t *testing.T) {
	nc := testenv.NATS(t)
	sub, err := nc.SubscribeSync(event.Subject("test", ">"))
	if err != nil {
		t.Fatal(err)
	}
	p := bus.NewPublisher(nc, "test", nil)
	if err := p.Send("thing.done", &pb.Request{Caller: "192.0.2.1", By: "noc"}, map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		t.Fatal(err)
	}
	if got, want := msg.Subject, "router.events.test.thing.done"; got != want {
		t.Errorf("subject %q, want %q", got, want)
	}
	if ev.Kind != "thing.done" || ev.By != "noc" || string(ev.Data) != `{"n":1}` {
		t.Errorf("event %+v", ev)
	}
	if err := p.Send("thing.bad", nil, func() {}); err == nil {
		t.Error("Send of an unencodable payload: want an error")
	}
	nc.Close()
	if err := p.Send("thing.done", nil, nil); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("Send on a closed connection: %v, want ErrConnectionClosed", err)
	}
}

// A request and an answer larger than NATS's maximum payload travel
// through the object store (each message on the bus stays small) and
// arrive whole; the objects are gone afterwards.
func TestLargeBodiesSpill(t *testing.T) {
	nc := testenv.NATS(t)
	const subject = "router.test.things.echo"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go bus.Run(ctx, nc, bus.ServiceConfig{Name: "test", Version: "1.0.0", Endpoints: []bus.Endpoint{{
		Subject: subject,
		Handler: func(_ context.Context, r *pb.Request) (int, any, error) {
			var s string
			if err := json.Unmarshal(r.Args, &s); err != nil {
				return 0, nil, err
			}
			return http.StatusOK, []string{s, s}, nil
		},
	}}})
	big := strings.Repeat("0123456789abcdef", int(nc.MaxPayload())/16+1000)
	args, _ := json.Marshal(big)
	// One call, once the service is up, with time to spare: an attempt
	// that found nobody, or gave up before its answer came (the race
	// detector makes 8 MiB slow), would leave its body in the bucket.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, nc, "test"); missing != nil {
		t.Fatalf("service never up: %v", missing)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	rep, err := bus.Call(cctx, nc, subject, &pb.Request{Method: http.MethodPost, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &got) != nil || len(got) != 2 || got[0] != big || got[1] != big {
		t.Fatalf("reply %d, %d bytes, want both %d-byte strings back", rep.Status, len(rep.Body), len(big))
	}
	js, _ := jetstream.New(nc)
	obs, err := js.ObjectStore(context.Background(), bus.SpillBucket)
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := obs.List(context.Background()); len(l) != 0 {
		t.Errorf("the spill bucket keeps %d objects", len(l))
	}
}

// WaitUp returns once the named services answer discovery, and names those
// that never do when its context ends.
func TestWaitUp(t *testing.T) {
	nc := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		time.Sleep(200 * time.Millisecond) // registers after WaitUp started
		_ = bus.Run(ctx, nc, bus.ServiceConfig{Name: "late", Version: "1.0.0"})
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, nc, "late"); missing != nil {
		t.Fatalf("missing %v, want none", missing)
	}
	short, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer scancel()
	if missing := bus.WaitUp(short, nc, "late", "never"); len(missing) != 1 || missing[0] != "never" {
		t.Fatalf("missing %v, want [never]", missing)
	}
}
