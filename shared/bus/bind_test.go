package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

type thing struct {
	Name string `json:"name" api:"required" pattern:"^[a-z]+$"`
	N    int    `json:"n" api:"min=0,max=100"`
}

type thingAnswer struct {
	api.Result
	Thing thing `json:"thing"`
}

var (
	thingsPut = api.Define[thing, thingAnswer](api.Meta{Service: "test", Name: "things.put", Summary: "put",
		Status: http.StatusCreated, Event: "thing.created"})
	thingsGet = api.Define[thing, thing](api.Meta{Service: "test", Name: "things.get", Summary: "get", Read: true})
)

// serve runs endpoints as the service "test" until the test ends.
func serve(t *testing.T, nc *nats.Conn, eps ...bus.Endpoint) {
	t.Helper()
	svc, err := bus.Serve(nc, bus.ServiceConfig{Name: "test", Version: "1.0.0", Endpoints: eps, Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
}

// A bound operation decodes, checks, calls, wraps {ok, code}, publishes its
// event; a typed client gets the typed answer or the error of its kind.
func TestBindAndInvoke(t *testing.T) {
	nc := testenv.NATS(t)
	events, err := nc.SubscribeSync(event.Subject("test", ">"))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, nc,
		bus.Bind(thingsPut, func(ctx context.Context, in *thing) (*thingAnswer, error) {
			if api.OriginOf(ctx).By != "noc" {
				return nil, apierr.Internal("", "origin %+v, want by noc", api.OriginOf(ctx))
			}
			return &thingAnswer{Result: api.Result{Message: "Thing created"}, Thing: *in}, nil
		}),
		bus.Bind(thingsGet, func(ctx context.Context, in *thing) (*thing, error) {
			return nil, apierr.NotFound("no thing %s", in.Name).With("near", []string{"a", "b"})
		}))

	ctx := api.WithOrigin(context.Background(), api.Origin{Caller: "192.0.2.7", By: "noc", RequestID: "r1"})
	got, err := bus.Invoke(ctx, nc, thingsPut, &thing{Name: "a", N: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !got.OK || got.Code != 201 || got.Message != "Thing created" || got.Thing.N != 5 {
		t.Errorf("answer %+v", got)
	}
	msg, err := events.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	_ = json.Unmarshal(msg.Data, &ev)
	if ev.Kind != "thing.created" || ev.By != "noc" || ev.Caller != "192.0.2.7" {
		t.Errorf("event %+v", ev)
	}

	// A field rule broken: 400 naming the field, the domain method not called.
	_, err = bus.Invoke(ctx, nc, thingsPut, &thing{Name: "a", N: 101})
	if ae := apierr.From(err); ae.Kind != apierr.KindInvalid || ae.Fields["field"] != "n" {
		t.Errorf("n=101: %v (%+v), want invalid naming n", err, ae)
	}
	// The domain's error comes back with its kind, message and fields.
	_, err = bus.Invoke(ctx, nc, thingsGet, &thing{Name: "zz"})
	ae := apierr.From(err)
	if ae.Kind != apierr.KindNotFound || ae.Message != "no thing zz" || ae.Fields["near"] == nil {
		t.Errorf("get: %+v, want not found with near", ae)
	}
}

// Handlers run inside micro's request handling: $SRV.STATS shows their
// processing time and counts errors.
func TestStatsShowProcessingTimeAndErrors(t *testing.T) {
	nc := testenv.NATS(t)
	serve(t, nc, bus.Bind(thingsGet, func(ctx context.Context, in *thing) (*thing, error) {
		time.Sleep(2 * time.Millisecond) // the work being measured
		if in.Name == "bad" {
			return nil, apierr.Conflict("bad thing")
		}
		return in, nil
	}))
	for _, name := range []string{"a", "b", "bad"} {
		_, _ = bus.Invoke(context.Background(), nc, thingsGet, &thing{Name: name})
	}
	// micro counts a request when its handler returns: after the answer
	// is sent (and after a change's or an error's log line), so the last
	// one may show a moment after its answer came.
	testenv.Eventually(t, 5*time.Second, func() error {
		msg, err := nc.Request("$SRV.STATS.test", nil, 5*time.Second)
		if err != nil {
			return err
		}
		var stats micro.Stats
		if err := json.Unmarshal(msg.Data, &stats); err != nil {
			t.Fatal(err)
		}
		var n, errs int
		var busy time.Duration
		for _, ep := range stats.Endpoints {
			n += ep.NumRequests
			errs += ep.NumErrors
			busy += ep.ProcessingTime
		}
		if n > 3 || errs > 1 {
			t.Fatalf("stats: %d requests, %d errors; want 3, 1", n, errs)
		}
		if n != 3 || errs != 1 || busy < 6*time.Millisecond {
			return fmt.Errorf("stats: %d requests, %d errors, %v processing; want 3, 1, at least 6ms", n, errs, busy)
		}
		return nil
	})
}

// A replica works on at most Concurrency requests of an endpoint at once.
func TestConcurrencyIsBounded(t *testing.T) {
	nc := testenv.NATS(t)
	var inFlight, peak atomic.Int32
	release := make(chan struct{})
	ep := bus.Bind(thingsGet, func(ctx context.Context, in *thing) (*thing, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		return in, nil
	})
	ep.Concurrency = 2
	serve(t, nc, ep)
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := bus.Invoke(context.Background(), nc, thingsGet, &thing{Name: "a"}); err != nil {
				t.Error(err)
			}
		}()
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if inFlight.Load() < 2 {
			return fmt.Errorf("in flight %d", inFlight.Load())
		}
		return nil
	})
	time.Sleep(100 * time.Millisecond) // room for a third to start, were it allowed
	close(release)
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
}

// A request that waited past its deadline is refused at once (503), not
// worked on for a caller who has given up.
func TestExpiredRequestIsShed(t *testing.T) {
	nc := testenv.NATS(t)
	var ran atomic.Bool
	serve(t, nc, bus.Bind(thingsGet, func(ctx context.Context, in *thing) (*thing, error) {
		ran.Store(true)
		return in, nil
	}))
	data, _ := (&pb.Request{Method: "GET", Args: json.RawMessage(`{"name":"a"}`)}).MarshalBinary()
	msg := &nats.Msg{Subject: thingsGet.Subject(), Data: data, Header: nats.Header{}}
	msg.Header.Set(bus.DeadlineHeader, strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10))
	resp, err := nc.RequestMsg(msg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bus.DecodeReply(resp)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != http.StatusServiceUnavailable || ran.Load() {
		t.Errorf("expired request: status %d, handler ran %v; want 503 without running", rep.Status, ran.Load())
	}
}

// BindRaw checks the request by the operation's rules as Bind does (400
// naming the field) and sends the handler's Raw answer as it is.
func TestBindRaw(t *testing.T) {
	nc := testenv.NATS(t)
	serve(t, nc, bus.BindRaw(thingsGet, func(_ context.Context, in *thing) (bus.Raw, error) {
		return bus.Raw{ContentType: "image/png", Data: []byte("png of " + in.Name)}, nil
	}))
	call := func(args string) *pb.Reply {
		rep, err := bus.CallOp(context.Background(), nc, thingsGet.Describe(), &pb.Request{Method: http.MethodGet, Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := call(`{"name":"ab"}`); rep.Status != 200 || rep.ContentType != "image/png" || string(rep.Body) != "png of ab" {
		t.Errorf("raw answer: %d %q %q", rep.Status, rep.ContentType, rep.Body)
	}
	if rep := call(`{"name":"AB"}`); rep.Status != 400 || !strings.Contains(string(rep.Body), `"field":"name"`) {
		t.Errorf("invalid name: %d %s", rep.Status, rep.Body)
	}
}
