package bench

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

type echoReq struct {
	Name string `json:"name" api:"required" pattern:"^[a-z0-9]{1,40}$"`
	N    int    `json:"n" api:"min=0,max=100000"`
}

type echoAnswer struct {
	api.Result
	Name string `json:"name"`
	N    int    `json:"n"`
}

var echoOp = api.Define[echoReq, echoAnswer](api.Meta{Service: "bench", Name: "echo.put", Summary: "echo",
	REST: []api.REST{{Method: "POST", Path: "/echo"}}})

func echo(ctx context.Context, r *echoReq) (*echoAnswer, error) {
	return &echoAnswer{Name: r.Name, N: r.N}, nil
}

// idle is how long echoWait's domain method waits, in a blocking system
// call as etcd's fsync does (a timer would be rounded up to the
// millisecond of the runtime's network poller): long enough for the
// idle CPUs to go to sleep.
const idle = 300 * time.Microsecond

func wait() {
	ts := syscall.NsecToTimespec(idle.Nanoseconds())
	_ = syscall.Nanosleep(&ts, nil)
}

var echoWaitOp = api.Define[echoReq, echoAnswer](api.Meta{Service: "bench", Name: "echowait.put", Summary: "echo after a wait",
	REST: []api.REST{{Method: "POST", Path: "/echo-wait"}}})

func echoWait(ctx context.Context, r *echoReq) (*echoAnswer, error) {
	wait()
	return &echoAnswer{Name: r.Name, N: r.N}, nil
}

// BenchmarkHop isolates the platform's own cost: an operation whose domain
// method does nothing, called directly (decode, rules, answer, as the
// adapter does), over the bus (Invoke), and through HTTP and the gateway.
// The difference is what the gateway and the bus add to every operation.
// The -wait300 forms are the same with a domain method (and, for
// http-only, a handler) that waits 300 µs, as a change waits for etcd:
// what the hops add once the machine has gone idle meanwhile.
// nats-only and http-nats-raw are the design's floors: a bare core NATS
// request and reply, and a bare net/http handler making that request.
func BenchmarkHop(b *testing.B) {
	nc := testenv.NATS(b)
	eps := map[bool]bus.Endpoint{false: bus.Bind(echoOp, echo), true: bus.Bind(echoWaitOp, echoWait)}
	svc, err := bus.Serve(nc, bus.ServiceConfig{Name: "bench", Version: "1.0.0", Endpoints: []bus.Endpoint{eps[false], eps[true]}, Log: benchLog})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Stop() })
	gw, err := gateway.New(gateway.Config{APIKey: key, NC: nc, Log: benchLog, Table: []api.Operation{echoOp, echoWaitOp}})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = gw.Serve(ctx, l) }()
	b.Cleanup(func() { cancel(); wg.Wait() })
	body := `{"name":"gold","n":500}`
	// The floors of the design: a bare NATS request and reply on the same
	// in-process connection (a core subscription, no envelope, no adapter,
	// no micro), and a bare net/http handler that makes that request (the
	// least a gateway onto NATS can do). What the gateway and the bus add
	// beyond these is this code's; these themselves are the machine's.
	answer := []byte("{\n    \"ok\": true\n}\n")
	for subject, waits := range map[string]bool{"bench.raw": false, "bench.rawwait": true} {
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
			if waits {
				wait()
			}
			_ = m.Respond(answer)
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	// Requests wait on one synchronous inbox subscription: nats.go's own
	// Request hands each answer through a request-mux goroutine that the
	// bus's calls do not have, which would not be a floor.
	inbox := nats.NewInbox()
	replies, err := nc.SubscribeSync(inbox)
	if err != nil {
		b.Fatal(err)
	}
	var rawMu sync.Mutex
	rawRequest := func(subject string, data []byte) (*nats.Msg, error) {
		rawMu.Lock()
		defer rawMu.Unlock()
		if err := nc.PublishRequest(subject, inbox, data); err != nil {
			return nil, err
		}
		return replies.NextMsg(5 * time.Second)
	}
	for _, waits := range []bool{false, true} {
		op, ep, path, suffix := echoOp, eps[false], "/echo", ""
		if waits {
			op, ep, path, suffix = echoWaitOp, eps[true], "/echo-wait", "-wait300"
		}
		url := "http://" + l.Addr().String() + path
		rawSubject := "bench.raw"
		if waits {
			rawSubject = "bench.rawwait"
		}
		for _, mode := range []string{"direct", "bus", "gateway", "gateway-raw", "http-only", "http-only-raw", "nats-only", "http-nats-raw"} {
			b.Run(mode+suffix, func(b *testing.B) {
				var lat latencies
				var raw net.Listener
				var rc *rawClient
				if strings.HasPrefix(mode, "http-only") {
					// The floor: a bare Go HTTP round trip on loopback.
					raw, _ = net.Listen("tcp", "127.0.0.1:0")
					go http.Serve(raw, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						_, _ = io.Copy(io.Discard, r.Body)
						if waits {
							wait()
						}
						w.Header().Set("Content-Type", "application/json")
						_, _ = w.Write([]byte("{\n    \"ok\": true\n}\n"))
					}))
					defer raw.Close()
					if mode == "http-only-raw" {
						rc = newRawClient(b, "http://"+raw.Addr().String())
					}
				} else if mode == "gateway-raw" {
					rc = newRawClient(b, url)
				} else if mode == "http-nats-raw" {
					// The floor of a gateway onto NATS: read, request, write.
					raw, _ = net.Listen("tcp", "127.0.0.1:0")
					go http.Serve(raw, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						in, _ := io.ReadAll(r.Body)
						m, err := rawRequest(rawSubject, in)
						if err != nil {
							http.Error(w, err.Error(), http.StatusServiceUnavailable)
							return
						}
						w.Header().Set("Content-Type", "application/json")
						_, _ = w.Write(m.Data)
					}))
					defer raw.Close()
					rc = newRawClient(b, "http://"+raw.Addr().String())
				}
				for i := 0; i < b.N; i++ {
					lat.time(func() {
						switch mode {
						case "direct":
							if _, _, err := ep.Handler(context.Background(), envelope(body)); err != nil {
								b.Fatal(err)
							}
						case "bus":
							if _, err := bus.Invoke(context.Background(), nc, op, &echoReq{Name: "gold", N: 500}); err != nil {
								b.Fatal(err)
							}
						case "gateway":
							post(b, url, body)
						case "gateway-raw", "http-only-raw", "http-nats-raw":
							rc.do(b, "POST", path, body)
						case "nats-only":
							if _, err := rawRequest(rawSubject, []byte(body)); err != nil {
								b.Fatal(err)
							}
						default:
							post(b, "http://"+raw.Addr().String()+path, body)
						}
					})
				}
				lat.report(b)
			})
		}
	}
}

func envelope(body string) *pb.Request {
	return &pb.Request{Method: "POST", Args: json.RawMessage(body), Caller: "127.0.0.1"}
}

func post(b *testing.B, url, body string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	drain(b, resp, "POST "+url)
}
