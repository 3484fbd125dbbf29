package bus_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// echoResponder answers every request on subject with its own data, after
// what delay says, as many times as times says.
func echoResponder(t *testing.T, nc *nats.Conn, subject string, delay func(data string) time.Duration, times func(data string) int) {
	t.Helper()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		var req pb.Request
		_ = req.UnmarshalBinary(m.Data)
		arg := string(req.Args)
		go func() {
			time.Sleep(delay(arg))
			for i := 0; i < times(arg); i++ {
				_ = m.RespondMsg(&nats.Msg{Data: req.Args, Header: bus.EncodeReply(&pb.Reply{Status: http.StatusOK})})
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func call(ctx context.Context, nc *nats.Conn, subject, arg string) (string, error) {
	rep, err := bus.Call(ctx, nc, subject, &pb.Request{Method: http.MethodGet, Args: []byte(arg)})
	if err != nil {
		return "", err
	}
	return string(rep.Body), nil
}

// An answer that comes after its caller gave up, or a second answer to
// one request, is never taken for the answer of a later request.
func TestCallNeverTakesAnotherRequestsAnswer(t *testing.T) {
	nc := testenv.NATS(t)
	const subject = "router.test.echo.get"
	echoResponder(t, nc, subject,
		func(arg string) time.Duration {
			if arg == `"late"` {
				return 300 * time.Millisecond
			}
			return 0
		},
		func(arg string) int {
			if arg == `"twice"` {
				return 2
			}
			return 1
		})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := call(ctx, nc, subject, `"late"`)
	cancel()
	if err == nil || apierr.From(err).Status() != http.StatusServiceUnavailable {
		t.Fatalf("late answer: got %v, want the 503 of a caller's deadline", err)
	}
	if got, err := call(context.Background(), nc, subject, `"twice"`); err != nil || got != `"twice"` {
		t.Fatalf("twice: %q %v", got, err)
	}
	// The late answer and the second "twice" arrive while these wait.
	deadline := time.Now().Add(600 * time.Millisecond)
	for i := 0; time.Now().Before(deadline); i++ {
		want := fmt.Sprintf(`"n%d"`, i)
		if got, err := call(context.Background(), nc, subject, want); err != nil || got != want {
			t.Fatalf("call %d: got %q %v, want %s", i, got, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Concurrent callers on one connection each get their own answer.
func TestCallConcurrentAnswers(t *testing.T) {
	nc := testenv.NATS(t)
	const subject = "router.test.echo.get"
	echoResponder(t, nc, subject, func(string) time.Duration { return 0 }, func(string) int { return 1 })
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				want := fmt.Sprintf(`"g%d-%d"`, g, i)
				if got, err := call(context.Background(), nc, subject, want); err != nil || got != want {
					errs <- fmt.Errorf("got %q %v, want %s", got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Requests started together are served at the same time: three that each
// take 400 ms are all answered within twice that (one after the other
// would take three times), each with its own answer, from one goroutine;
// an operation nobody serves is the 503 Invoke would give. (The responder
// is a plain subscription answering each request from a goroutine of its
// own: a micro endpoint's queue group may hand two of them to the same
// worker.)
func TestStartAsksAtOnce(t *testing.T) {
	nc := testenv.NATS(t)
	echoResponder(t, nc, thingsGet.Subject(), func(string) time.Duration { return 400 * time.Millisecond }, func(string) int { return 1 })
	serve(t, nc) // the service "test", for AskUp
	begin := time.Now()
	var ps []*bus.Pending[thing]
	for i := 0; i < 3; i++ {
		ps = append(ps, bus.Start(context.Background(), nc, thingsGet, &thing{Name: "abc", N: i}))
	}
	up := bus.AskUp(nc, "test", time.Second)
	none := bus.Start(context.Background(), nc, thingsPut, &thing{Name: "abc"})
	for i, p := range ps {
		out, err := p.Wait()
		if err != nil || out.N != i {
			t.Fatalf("answer %d: %+v %v", i, out, err)
		}
	}
	if took := time.Since(begin); took > 800*time.Millisecond {
		t.Fatalf("three requests of 400 ms took %v: not served at once", took)
	}
	if !up() {
		t.Fatal("AskUp: the test service is up, answered false")
	}
	if _, err := none.Wait(); apierr.From(err).Status() != http.StatusServiceUnavailable {
		t.Fatalf("an operation nobody serves: %v, want a 503", err)
	}
	if bus.AskUp(nc, "nobody", 100*time.Millisecond)() {
		t.Fatal("AskUp: a service that does not exist answered true")
	}
}
