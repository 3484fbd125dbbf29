package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/apierr"
)

// Handler runs one operation. It returns the HTTP status and the answer
// body, or an error (an *apierr.Error, or anything else for a 500). Bind
// makes one from a typed domain method; raw handlers are for tests and
// binary answers.
type Handler func(ctx context.Context, req *pb.Request) (status int, body any, err error)

// Endpoint binds a handler to a subject.
type Endpoint struct {
	Subject string
	Handler Handler
	// Concurrency is how many requests of this endpoint one replica works
	// on at once; 0 is api.DefaultConcurrency.
	Concurrency int
}

// ServiceConfig declares a service on the bus.
type ServiceConfig struct {
	Name        string // e.g. "subscribers"
	Version     string // semver, shown by $SRV.INFO
	Description string
	Endpoints   []Endpoint
	Log         *slog.Logger
}

// pendingPerWorker bounds the requests waiting for one worker of an
// endpoint in this process. Past it the NATS client drops them (the caller
// sees a 503 after its deadline); before that, requests that waited past
// their deadline are refused at once, so an overloaded service sheds load
// instead of piling up work nobody waits for.
const pendingPerWorker = 256

// Serve declares the service with nats.go/micro: discovery, statistics and
// a queue group come with it. Each endpoint gets Concurrency subscriptions
// in the queue group (micro endpoints of the same name): the handler runs
// inside micro's request handling, so $SRV.STATS shows real processing time
// and counts errors, and a replica works on at most Concurrency requests of
// an endpoint at once. Changes (any method but GET) are logged with their
// caller.
func Serve(nc *nats.Conn, cfg ServiceConfig) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        cfg.Name,
		Version:     cfg.Version,
		Description: cfg.Description,
		QueueGroup:  pb.QueueGroup,
	})
	if err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	w := &worker{nc: nc, log: log, maxPayload: nc.MaxPayload(), pub: NewPublisher(nc, cfg.Name, log)}
	for _, ep := range cfg.Endpoints {
		ep := ep
		name := strings.ReplaceAll(strings.TrimPrefix(ep.Subject, api.SubjectPrefix+"."), ".", "_")
		n := ep.Concurrency
		if n <= 0 {
			n = api.DefaultConcurrency
		}
		h := micro.HandlerFunc(func(r micro.Request) { w.handle(r, ep) })
		for i := 0; i < n; i++ {
			if err := svc.AddEndpoint(name, h, micro.WithEndpointSubject(ep.Subject),
				micro.WithEndpointPendingLimits(pendingPerWorker, pendingPerWorker<<16)); err != nil {
				_ = svc.Stop()
				return nil, err
			}
		}
	}
	// The readiness endpoint comes last: micro answers its discovery ping
	// as soon as the service exists, before its endpoints are subscribed,
	// so Up and WaitUp ask this one, which answers only once every
	// endpoint before it is in the server (one connection's subscriptions
	// are processed in order).
	if err := svc.AddEndpoint("ready", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte("{}")) }),
		micro.WithEndpointSubject(ReadySubject(cfg.Name))); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// The server has every subscription once Flush returns: a caller that
	// sees one endpoint answer finds all of them.
	if err := nc.Flush(); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("bus: declaring %s: %w", cfg.Name, err)
	}
	return svc, nil
}

// Run declares the service (Serve), serves until ctx ends, then stops it:
// the whole life of a service's bus side, so a service's Run is one call.
func Run(ctx context.Context, nc *nats.Conn, cfg ServiceConfig) error {
	svc, err := Serve(nc, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return svc.Stop()
}

type worker struct {
	nc         *nats.Conn
	log        *slog.Logger
	maxPayload int64
	pub        *Publisher
}

type publisherKey struct{}

func (w *worker) handle(r micro.Request, ep Endpoint) {
	var req pb.Request
	deadline := time.Now().Add(api.DefaultTimeout)
	if ms, err := strconv.ParseInt(r.Headers().Get(DeadlineHeader), 10, 64); err == nil {
		deadline = time.UnixMilli(ms)
	}
	if time.Until(deadline) <= 0 {
		w.respond(r, ep.Subject, &req, 0, nil, apierr.Unavailable("the %s service is busy: the request waited past its deadline; try again", serviceOf(ep.Subject)))
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	data := r.Data()
	if name := r.Headers().Get(SpillHeader); name != "" {
		var err error
		if data, err = unspill(ctx, w.nc, name); err != nil {
			w.respond(r, ep.Subject, &req, 0, nil, apierr.Unavailable("%v", err))
			return
		}
	}
	if err := req.UnmarshalBinary(data); err != nil {
		w.respond(r, ep.Subject, &req, 0, nil, apierr.BadRequest("malformed request envelope"))
		return
	}

	ctx = api.WithOrigin(ctx, api.Origin{Caller: req.Caller, By: req.By, RequestID: req.RequestID, Action: req.Action})
	ctx = context.WithValue(ctx, publisherKey{}, w.pub)
	stop := w.progress(r)
	status, body, err := safeCall(ctx, ep.Handler, &req)
	stop()
	w.respond(r, ep.Subject, &req, status, body, err)
}

// progress tells a caller that asked for it (ProgressHeader) that its
// request is being worked on: a message at once and one every
// ProgressEvery until the returned stop, which the answer follows (so no
// progress comes after it). A caller hearing nothing more for
// ProgressLive takes this replica for gone rather than waiting out the
// operation's timeout.
func (w *worker) progress(r micro.Request) (stop func()) {
	reply := r.Reply()
	if reply == "" || r.Headers().Get(ProgressHeader) == "" {
		return func() {}
	}
	say := func() {
		_ = w.nc.PublishMsg(&nats.Msg{Subject: reply, Header: nats.Header{ProgressHeader: []string{"1"}}})
	}
	say()
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				say()
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func safeCall(ctx context.Context, h Handler, req *pb.Request) (status int, body any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = apierr.Internal("", "internal error: %v", p)
		}
	}()
	return h(ctx, req)
}

// respond sends the answer: a success through micro's Respond, an error
// through micro's error path (so $SRV.STATS counts it), both carrying the
// status in a header and the body as it is. An answer over NATS's maximum
// payload is replaced by a 500 saying so.
func (w *worker) respond(r micro.Request, subject string, req *pb.Request, status int, body any, err error) {
	rep := &pb.Reply{Status: status}
	var ae *apierr.Error
	if err == nil {
		switch b := body.(type) {
		case Raw:
			rep.ContentType, rep.Headers, rep.Body = b.ContentType, b.Headers, b.Data
		default:
			raw, merr := json.Marshal(b)
			if merr != nil {
				err = apierr.Internal(merr.Error(), "cannot encode answer")
			}
			rep.Body = raw
		}
	}
	var spilled string
	if err == nil && w.maxPayload > 0 && len(rep.Body) > spillAt(w.nc) {
		// NATS would refuse it: it goes through the object store.
		sctx, cancel := context.WithTimeout(context.Background(), api.DefaultTimeout)
		spilled, err = spill(sctx, w.nc, rep.Body)
		cancel()
		if err != nil {
			err = apierr.Internal(err.Error(), "the answer of %d bytes could not be sent", len(rep.Body))
		}
	}
	if err != nil {
		ae = apierr.From(err)
		rep = &pb.Reply{Status: ae.Status()}
		rep.Body, _ = json.Marshal(ae.Body())
	}
	head := EncodeReply(rep)
	if ae == nil && spilled != "" {
		head.Set(SpillHeader, spilled)
		rep.Body = nil
	}
	hdr := micro.Headers(head)
	var serr error
	if ae != nil {
		serr = r.Error(strconv.Itoa(rep.Status), ae.Message, rep.Body, micro.WithHeaders(hdr))
	} else {
		serr = r.Respond(rep.Body, micro.WithHeaders(hdr))
	}
	// The answer is in the connection's buffer and nats.go's flusher,
	// readied on this P, writes it out once this goroutine yields. A
	// change or an error has a log line to write (half of this function's
	// time when profiled): yield first, so the answer travels before it
	// and the caller does not wait for it. A read that succeeded logs
	// nothing, and yields by returning. (The event stays ahead of the
	// answer, on the same connection: it reaches the bus before the caller
	// can make its next change, so a tap sees one client's changes in the
	// order it made them.)
	if req.Method != http.MethodGet || ae != nil {
		runtime.Gosched()
	}
	w.logOutcome(subject, req, rep.Status, ae, err)
	if serr != nil {
		w.log.Error("answer not sent", "subject", subject, "request_id", req.RequestID, "err", serr)
	}
}

// logOutcome logs each change once, here, with who made it; failures of
// reads only when the router is at fault.
func (w *worker) logOutcome(subject string, req *pb.Request, status int, ae *apierr.Error, err error) {
	// The action form carries the REST method of its operation, so the
	// method alone says whether this was a change.
	change := req.Method != http.MethodGet
	switch {
	case ae != nil && status >= 500 && ae.Kind != apierr.KindUnavailable:
		w.log.Error("operation failed", "subject", subject, "request_id", req.RequestID,
			"caller", req.Caller, "by", req.By, "status", status, "err", err)
	case ae != nil && change:
		w.log.Info("change refused", "subject", subject, "request_id", req.RequestID,
			"caller", req.Caller, "by", req.By, "status", status, "error", ae.Message)
	case ae == nil && change:
		w.log.Info("change", "subject", subject, "request_id", req.RequestID,
			"caller", req.Caller, "by", req.By, "status", status)
	}
}

func serviceOf(subject string) string {
	parts := strings.SplitN(subject, ".", 3)
	if len(parts) < 2 {
		return subject
	}
	return parts[1]
}

// Raw is a non-JSON answer body (a PNG, an archive). It travels as the
// message body as it is; the gateway writes the bytes.
type Raw struct {
	ContentType string
	Headers     map[string]string
	Data        []byte
}

// Bind makes the endpoint of op from a typed domain method: the adapter
// decodes the arguments into a Req (body, then query, then path
// parameters; the action form's strings leniently), checks the field
// rules, calls fn, sets the answer's {ok, code} head, publishes the
// operation's event, and turns fn's error into the error answer of its
// kind.
func Bind[Req, Resp any](op api.Op[Req, Resp], fn func(context.Context, *Req) (*Resp, error)) Endpoint {
	m := op.Describe()
	return Endpoint{Subject: m.Subject(), Concurrency: m.ConcurrencyOrDefault(),
		Handler: func(ctx context.Context, req *pb.Request) (int, any, error) {
			var in Req
			if err := op.Decode(Arguments(req), &in); err != nil {
				return 0, nil, err
			}
			out, err := fn(ctx, &in)
			if err != nil {
				return 0, nil, err
			}
			status := m.SuccessStatus()
			if o, ok := any(out).(api.Outcomer); ok {
				r := o.Outcome()
				if r.Code != 0 {
					status = r.Code
				}
				r.OK, r.Code = true, status
			}
			kind, data := m.Event, any(out)
			if e, ok := any(out).(api.Evented); ok {
				kind, data = e.EventOf()
			}
			if p, _ := ctx.Value(publisherKey{}).(*Publisher); p != nil && kind != "" {
				p.Publish(kind, req, data)
			}
			return status, out, nil
		}}
}

// BindRaw makes op's endpoint from fn, whose answer is not JSON (an
// image): the request is decoded and checked by op's rules as Bind does,
// and fn's Raw goes out as it is (the gateway writes its body with its
// content type). Resp only documents the answer.
func BindRaw[Req, Resp any](op api.Op[Req, Resp], fn func(context.Context, *Req) (Raw, error)) Endpoint {
	m := op.Describe()
	return Endpoint{Subject: m.Subject(), Concurrency: m.ConcurrencyOrDefault(),
		Handler: func(ctx context.Context, req *pb.Request) (int, any, error) {
			var in Req
			if err := op.Decode(Arguments(req), &in); err != nil {
				return 0, nil, err
			}
			out, err := fn(ctx, &in)
			if err != nil {
				return 0, nil, err
			}
			return m.SuccessStatus(), out, nil
		}}
}

// Arguments merges an operation's argument sources into one object: the
// body's fields, then the query's for names the body lacks, then the path
// parameters'.
func Arguments(req *pb.Request) map[string]json.RawMessage {
	args := map[string]json.RawMessage{}
	if len(req.Args) > 0 {
		_ = json.Unmarshal(req.Args, &args)
		if args == nil {
			args = map[string]json.RawMessage{}
		}
	}
	for k, v := range req.Query {
		if _, ok := args[k]; !ok && len(v) > 0 {
			args[k], _ = json.Marshal(v[len(v)-1])
		}
	}
	for k, v := range req.Params {
		if _, ok := args[k]; !ok {
			args[k], _ = json.Marshal(v)
		}
	}
	return args
}
