package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/apierr"
)

// DeadlineHeader carries the caller's deadline (unix milliseconds) so a
// service stops working on a request nobody waits for any more.
const DeadlineHeader = "Router-Deadline"

// Handler runs one operation. It returns the HTTP status and the answer
// body, or an error (an *apierr.Error, or anything else for a 500).
type Handler func(ctx context.Context, req *pb.Request) (status int, body any, err error)

// Endpoint binds a handler to a subject.
type Endpoint struct {
	Subject string
	Handler Handler
}

// ServiceConfig declares a service on the bus.
type ServiceConfig struct {
	Name        string // e.g. "subscribers"
	Version     string // semver, shown by $SRV.INFO
	Description string
	Endpoints   []Endpoint
	Log         *slog.Logger
}

// Serve declares the service with nats.go/micro: discovery, stats and a
// queue group come with it. Every request is handled on its own goroutine so
// a slow operation never holds up the next one; domain code serialises
// where it must. Changes (any method but GET) are logged with their caller.
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
	for _, ep := range cfg.Endpoints {
		h := ep.Handler
		subject := ep.Subject
		name := strings.ReplaceAll(strings.TrimPrefix(subject, pb.Prefix+"."), ".", "_")
		err := svc.AddEndpoint(name, micro.HandlerFunc(func(r micro.Request) {
			go handle(r, subject, h, log, nc.MaxPayload())
		}), micro.WithEndpointSubject(subject))
		if err != nil {
			_ = svc.Stop()
			return nil, err
		}
	}
	return svc, nil
}

func handle(r micro.Request, subject string, h Handler, log *slog.Logger, maxPayload int64) {
	var req pb.Request
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		respond(r, apierr.BadRequest("malformed request envelope"), nil, maxPayload)
		return
	}
	ctx := context.Background()
	if ms, err := strconv.ParseInt(r.Headers().Get(DeadlineHeader), 10, 64); err == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.UnixMilli(ms))
		defer cancel()
	}
	status, body, err := safeCall(ctx, h, &req)
	if err != nil {
		ae := apierr.From(err)
		if ae.Status >= 500 {
			log.Error("operation failed", "subject", subject, "request_id", req.RequestID,
				"caller", req.Caller, "by", req.By, "status", ae.Status, "err", err)
		} else if req.Method != http.MethodGet {
			log.Info("change refused", "subject", subject, "request_id", req.RequestID,
				"caller", req.Caller, "by", req.By, "status", ae.Status, "error", ae.Message)
		}
		respond(r, ae, nil, maxPayload)
		return
	}
	// The action form carries the REST method of its operation, so the
	// method alone says whether this was a change.
	if req.Method != http.MethodGet {
		log.Info("change", "subject", subject, "request_id", req.RequestID,
			"caller", req.Caller, "by", req.By, "status", status)
	}
	if err := respond(r, nil, &reply{status, body}, maxPayload); err != nil {
		log.Error("answer not sent", "subject", subject, "request_id", req.RequestID, "err", err)
	}
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

type reply struct {
	status int
	body   any
}

func safeCall(ctx context.Context, h Handler, req *pb.Request) (status int, body any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = apierr.Internal("", "internal error: %v", p)
		}
	}()
	return h(ctx, req)
}

// respond sends the reply. An answer over NATS's maximum payload is
// replaced by a 500 saying so.
func respond(r micro.Request, ae *apierr.Error, ok *reply, maxPayload int64) error {
	var rep pb.Reply
	if ae != nil {
		rep.Status = ae.Status
		rep.Body, _ = json.Marshal(ae.Body())
	} else {
		rep.Status = ok.status
		switch b := ok.body.(type) {
		case Raw:
			rep.ContentType, rep.Headers = b.ContentType, b.Headers
			rep.Body, _ = json.Marshal(b.Data) // base64 string
		default:
			raw, err := json.Marshal(b)
			if err != nil {
				rep.Status = http.StatusInternalServerError
				raw, _ = json.Marshal(apierr.Internal(err.Error(), "cannot encode answer").Body())
			}
			rep.Body = raw
		}
	}
	out, _ := json.Marshal(&rep)
	if maxPayload > 0 && int64(len(out)) > maxPayload {
		// NATS would refuse it, and the caller would wait out its
		// deadline and report a service that did not answer.
		ae := apierr.Internal(fmt.Sprintf("%d bytes, at most %d", len(out), maxPayload), "the answer is too large for the bus; ask for less (a page, a filter)")
		raw, _ := json.Marshal(&pb.Reply{Status: ae.Status, Body: mustMarshal(ae.Body())})
		_ = r.Respond(raw)
		return fmt.Errorf("answer of %d bytes over the bus's maximum payload of %d", len(out), maxPayload)
	}
	return r.Respond(out)
}

func mustMarshal(v any) json.RawMessage {
	raw, _ := json.Marshal(v)
	return raw
}

// Raw is a non-JSON answer body (a PNG, an archive). It travels in the
// envelope base64-encoded as a JSON string; the gateway writes the bytes.
type Raw struct {
	ContentType string
	Headers     map[string]string
	Data        []byte
}
