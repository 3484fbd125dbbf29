package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/apierr"
)

// DeadlineHeader carries the caller's deadline (unix milliseconds) so a
// service stops working on a request nobody waits for any more.
const DeadlineHeader = "Router-Deadline"

// ProgressHeader asks a responder for progress messages (on a request)
// and marks one (on a message to the reply subject, without a body): a
// change is sent once, and without them a caller whose responder died
// holding it would wait out the operation's whole timeout (3 minutes for
// POST /plans) before its 503.
const ProgressHeader = "Router-Progress"

// ProgressEvery is how often a responder working on a request that asked
// for progress says so; ProgressLive how long its caller waits past the
// last progress before taking it for gone (a stalled process, a lost
// message, a starved CPU leave room for a few missed ones).
const (
	ProgressEvery = time.Second
	ProgressLive  = 5 * time.Second
)

// Reply headers: the status, the content type of a binary body, and extra
// HTTP headers (prefixed).
const (
	statusHeader      = "Router-Status"
	contentTypeHeader = "Router-Content-Type"
	httpHeaderPrefix  = "Router-Http-"
)

// EncodeReply renders a reply's head as message headers; the body travels
// as the message's data, unencoded.
func EncodeReply(rep *pb.Reply) nats.Header {
	h := nats.Header{statusHeader: []string{strconv.Itoa(rep.Status)}}
	if rep.ContentType != "" {
		h.Set(contentTypeHeader, rep.ContentType)
	}
	for k, v := range rep.Headers {
		h.Set(httpHeaderPrefix+k, v)
	}
	return h
}

// DecodeReply reads a reply message.
func DecodeReply(msg *nats.Msg) (*pb.Reply, error) {
	rep := &pb.Reply{Body: msg.Data}
	s := msg.Header.Get(statusHeader)
	if s == "" {
		s = msg.Header.Get(micro.ErrorCodeHeader)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil, fmt.Errorf("reply without a status")
	}
	rep.Status = n
	rep.ContentType = msg.Header.Get(contentTypeHeader)
	for k, v := range msg.Header {
		if strings.HasPrefix(k, httpHeaderPrefix) && len(v) > 0 {
			if rep.Headers == nil {
				rep.Headers = map[string]string{}
			}
			rep.Headers[strings.TrimPrefix(k, httpHeaderPrefix)] = v[0]
		}
	}
	return rep, nil
}

// Call sends req to subject and waits for the reply, at most until ctx's
// deadline (api.DefaultTimeout when it has none). A subject nobody serves
// is a 503 naming the service, not a hang.
func Call(ctx context.Context, nc *nats.Conn, subject string, req *pb.Request) (*pb.Reply, error) {
	return send(ctx, nc, subject, req, false).wait()
}

// sent is a request on the bus whose answer is not read yet: send and
// wait are Call's two halves, so one goroutine can have several requests
// out at once.
type sent struct {
	ctx     context.Context
	cancel  context.CancelFunc // ends ctx once the answer is read; may be nil
	nc      *nats.Conn
	subject string
	size    int
	w       *waiter
	failed  error // before anything was published: wait returns it as it is
	pubErr  error // publishing failed
}

// send publishes req; with progress it asks the responder for progress
// messages, and a responder gone silent after them is a 503 at once.
func send(ctx context.Context, nc *nats.Conn, subject string, req *pb.Request, progress bool) *sent {
	s := &sent{ctx: ctx, nc: nc, subject: subject}
	data, err := req.MarshalBinary()
	if err != nil {
		s.failed = fmt.Errorf("bus: encode request: %w", err)
		return s
	}
	s.size = len(data)
	if _, ok := ctx.Deadline(); !ok {
		s.ctx, s.cancel = context.WithTimeout(ctx, api.DefaultTimeout)
	}
	dl, _ := s.ctx.Deadline()
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(DeadlineHeader, strconv.FormatInt(dl.UnixMilli(), 10))
	if progress {
		msg.Header.Set(ProgressHeader, "1")
	}
	if len(data) > spillAt(nc) {
		name, err := spill(s.ctx, nc, data)
		if err != nil {
			s.failed = err
			return s
		}
		msg.Data = nil
		msg.Header.Set(SpillHeader, name)
	}
	s.w, s.pubErr = publishRequest(s.ctx, nc, msg)
	return s
}

// wait reads the answer; it is called once per send.
func (s *sent) wait() (*pb.Reply, error) {
	if s.cancel != nil {
		defer s.cancel()
	}
	if s.failed != nil {
		return nil, s.failed
	}
	var resp *nats.Msg
	err := s.pubErr
	if err == nil {
		resp, err = s.w.wait(s.ctx)
	}
	switch {
	case errors.Is(err, errGone):
		return nil, &unanswered{apierr.Unavailable("the %s service stopped answering while it handled the request (%s): the replica holding it is gone; a change is applied wholly or not at all, so read whether it was, then try again", serviceOf(s.subject), s.subject), false}
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &unanswered{apierr.Unavailable("the %s service is not running (nothing serves %s)", serviceOf(s.subject), s.subject), true}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, &unanswered{apierr.Unavailable("the %s service did not answer in time (%s); try again", serviceOf(s.subject), s.subject), false}
	case errors.Is(err, nats.ErrMaxPayload):
		return nil, apierr.New(apierr.KindTooLarge, "request of %d bytes too large for the bus (at most %d)", s.size, s.nc.MaxPayload())
	case err != nil:
		return nil, fmt.Errorf("bus: request %s: %w", s.subject, err)
	}
	if name := resp.Header.Get(SpillHeader); name != "" {
		if resp.Data, err = unspill(s.ctx, s.nc, name); err != nil {
			return nil, err
		}
	}
	rep, err := DecodeReply(resp)
	if err != nil {
		return nil, fmt.Errorf("bus: reply from %s: %w", s.subject, err)
	}
	return rep, nil
}

// unanswered is a request nobody answered: no responder at all, or none in
// time. It is a 503 (apierr.From finds the wrapped error).
type unanswered struct {
	err          *apierr.Error
	noResponders bool
}

func (u *unanswered) Error() string { return u.err.Message }
func (u *unanswered) Unwrap() error { return u.err }

// noResponderGrace is how long a read keeps asking a subject nobody
// serves: long enough for a replica that is (re)registering, short enough
// that a stopped service is reported promptly.
const noResponderGrace = time.Second

// CallOp calls operation m, bounded by its timeout when ctx has no
// deadline. A read (m.Read) that a replica does not answer within
// m.Attempt is asked again, so a replica that died holding it never fails
// a read; a change is sent once, and a replica that died holding it is a
// 503 the caller can act on (etcd transactions make the change wholly
// applied or not at all): at the operation's timeout, or, for one allowed
// longer than api.DefaultTimeout, within ProgressLive of the replica's
// last progress message once it started on it.
func CallOp(ctx context.Context, nc *nats.Conn, m *api.Meta, req *pb.Request) (*pb.Reply, error) {
	return startOp(ctx, nc, m, req).wait()
}

// opCall is CallOp with its first attempt sent and its answer not read.
type opCall struct {
	ctx    context.Context
	cancel context.CancelFunc // may be nil
	nc     *nats.Conn
	m      *api.Meta
	req    *pb.Request
	start  time.Time
	first  *sent
}

func startOp(ctx context.Context, nc *nats.Conn, m *api.Meta, req *pb.Request) *opCall {
	c := &opCall{ctx: ctx, nc: nc, m: m, req: req, start: time.Now()}
	if _, ok := ctx.Deadline(); !ok {
		c.ctx, c.cancel = context.WithTimeout(ctx, m.TimeoutOrDefault())
	}
	c.first = c.attempt()
	return c
}

// attempt sends the request once; a read's attempt is bounded by
// m.Attempt.
func (c *opCall) attempt() *sent {
	if !c.m.Read {
		// A change is sent once. One allowed longer than the default
		// (POST /plans: 3 minutes, for a reshape) asks for progress, so
		// a replica that died holding it is told within seconds; the
		// others are bounded by the default anyway, and spare the
		// extra message (a wake-up of the caller, 60 µs or so).
		return send(c.ctx, c.nc, c.m.Subject(), c.req, c.m.TimeoutOrDefault() > api.DefaultTimeout)
	}
	actx, cancel := context.WithTimeout(c.ctx, c.m.AttemptOrDefault())
	s := send(actx, c.nc, c.m.Subject(), c.req, false)
	s.cancel = cancel
	return s
}

func (c *opCall) wait() (*pb.Reply, error) {
	if c.cancel != nil {
		defer c.cancel()
	}
	rep, err := c.first.wait()
	if !c.m.Read {
		return rep, err
	}
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		var u *unanswered
		if err == nil || c.ctx.Err() != nil || !errors.As(err, &u) {
			return rep, err
		}
		if u.noResponders {
			if time.Since(c.start) > noResponderGrace {
				return nil, err
			}
			select {
			case <-c.ctx.Done():
				return nil, err
			case <-time.After(backoff):
			}
		}
		rep, err = c.attempt().wait()
	}
}

// Invoke calls op with a typed request and returns the typed answer: how
// services call each other. The request carries the origin in ctx (who
// asked the calling service), so the callee logs the real caller. An error
// answer comes back as an *apierr.Error of the answer's kind, with its
// message and extra fields.
func Invoke[Req, Resp any](ctx context.Context, nc *nats.Conn, op api.Op[Req, Resp], in *Req) (*Resp, error) {
	return Start(ctx, nc, op, in).Wait()
}

// Pending is an operation's request on its way (Start); Wait reads its
// answer.
type Pending[Resp any] struct {
	m      *api.Meta
	c      *opCall
	failed error
}

// Start sends op's request and returns without waiting for the answer:
// Invoke in two halves. A caller that asks several services starts every
// request first and then waits for each, so they work at the same time
// without a goroutine per question. Wait must be called once for every
// Start: it releases the request's deadline and reply subscription.
func Start[Req, Resp any](ctx context.Context, nc *nats.Conn, op api.Op[Req, Resp], in *Req) *Pending[Resp] {
	m := op.Describe()
	args, err := json.Marshal(in)
	if err != nil {
		return &Pending[Resp]{m: m, failed: fmt.Errorf("bus: encode %s request: %w", m.Subject(), err)}
	}
	o := api.OriginOf(ctx)
	method := http.MethodPost
	if m.Read {
		method = http.MethodGet
	}
	req := &pb.Request{Method: method, Args: args, Caller: o.Caller, By: o.By, RequestID: o.RequestID, Action: o.Action}
	return &Pending[Resp]{m: m, c: startOp(ctx, nc, m, req)}
}

// Wait waits for the answer of a Start and returns it typed, as Invoke
// does.
func (p *Pending[Resp]) Wait() (*Resp, error) {
	if p.failed != nil {
		return nil, p.failed
	}
	rep, err := p.c.wait()
	if err != nil {
		return nil, err
	}
	if rep.Status >= 300 {
		return nil, ErrorOf(rep)
	}
	out := new(Resp)
	if err := json.Unmarshal(rep.Body, out); err != nil {
		return nil, fmt.Errorf("bus: decode %s answer: %w", p.m.Subject(), err)
	}
	return out, nil
}

// ErrorOf rebuilds the error an error reply carries.
func ErrorOf(rep *pb.Reply) *apierr.Error {
	var body map[string]any
	_ = json.Unmarshal(rep.Body, &body)
	e := &apierr.Error{Kind: apierr.KindOf(rep.Status)}
	e.Message, _ = body["error"].(string)
	for k, v := range body {
		switch k {
		case "ok", "code", "error":
		default:
			e = e.With(k, v)
		}
	}
	return e
}
