// Package gateway is the HTTP front of the router. It holds no state and
// touches neither etcd nor the kernel: it authenticates each request, applies
// the spec's conventions (formats, limits, errors, trailing slashes, the
// action API) and forwards the operation on the bus subject of the service
// that owns it, then writes that service's answer.
package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"

	"routerd.dev/proto"
	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/jsonout"
)

// MaxBody is the largest request body read; larger gets 413.
const MaxBody = 4 << 20

// Config is what a gateway needs.
type Config struct {
	// APIKey is the router's key; empty refuses every request.
	APIKey string
	// AuthLog receives failed authentications (may be nil in tests).
	AuthLog *AuthLog
	// NC is the bus connection.
	NC *nats.Conn
	// Log is the gateway's logger.
	Log *slog.Logger
	// Table is the operation table served; nil is api.Table (tests serve
	// their own).
	Table []api.Operation
}

func errorf(format string, a ...any) error { return fmt.Errorf("gateway: "+format, a...) }

// Gateway is an http.Handler serving the whole API.
type Gateway struct {
	cfg     Config
	mux     *chi.Mux
	actions map[string]*api.Meta
	forms   []string
}

// New builds the route tree from the operation table (api.Table unless
// cfg.Table says otherwise).
func New(cfg Config) (*Gateway, error) {
	if cfg.NC == nil {
		return nil, errors.New("gateway: no bus connection")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Table == nil {
		cfg.Table = api.Table
	}
	g := &Gateway{cfg: cfg, mux: chi.NewMux(), actions: map[string]*api.Meta{}}
	if err := g.mount(cfg.Table); err != nil {
		return nil, err
	}
	g.mux.Handle("/api", http.HandlerFunc(g.actionHandler))
	g.mux.NotFound(g.usage)
	g.mux.MethodNotAllowed(g.methodNotAllowed)
	return g, nil
}

// ServeHTTP authenticates, normalises and dispatches one request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	caller := callerAddr(r)
	if !keyMatches(g.cfg.APIKey, givenKey(r)) {
		reason := "wrong key"
		if givenKey(r) == "" {
			reason = "no key"
		}
		g.cfg.AuthLog.Failure(caller, r, reason)
		g.reportAuthFailure(caller, r)
		writeError(w, apierr.New(apierr.KindUnauthorized, authMessage))
		return
	}
	if p := strings.TrimRight(r.URL.Path, "/"); p != r.URL.Path {
		if p == "" {
			p = "/"
		}
		r.URL.Path, r.URL.RawPath = p, ""
	}
	if r.ContentLength > MaxBody {
		refuseLarge(w, r)
		return
	}
	body, err := readBody(r)
	if err != nil {
		writeError(w, apierr.BadRequest("cannot read request body: %v", err))
		return
	}
	if len(body) > MaxBody {
		refuseLarge(w, r)
		return
	}
	ctx := context.WithValue(r.Context(), bodyKey{}, body)
	ctx = context.WithValue(ctx, callerKey{}, caller)
	g.mux.ServeHTTP(w, r.WithContext(ctx))
}

// readBody reads a body of at most MaxBody+1 bytes: one allocation of
// its declared length when it has one (io.ReadAll's growing buffer was a
// fifth of the gateway's own work for a small body), none when it is
// empty.
func readBody(r *http.Request) ([]byte, error) {
	switch {
	case r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody:
		return nil, nil
	case r.ContentLength > 0 && r.ContentLength <= MaxBody:
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
}

type bodyKey struct{}
type callerKey struct{}

// drainLimit bounds how much of an oversized body is read and thrown away
// before the 413 goes out.
const drainLimit = 64 << 20

// refuseLarge answers 413 to a body over MaxBody. Many HTTP clients
// (Python's urllib, billing systems' libraries) send the whole body before
// reading the answer: closing the connection under them while they write
// makes them report a connection reset, not the 413. So the rest of the
// body is read and discarded, up to drainLimit, before answering and
// closing. A client that asked to be told first (Expect: 100-continue) is
// told at once, and sends nothing.
func refuseLarge(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Expect"), "100-continue") && r.ContentLength <= drainLimit {
		_, _ = io.CopyN(io.Discard, r.Body, drainLimit)
	}
	w.Header().Set("Connection", "close")
	writeError(w, apierr.New(apierr.KindTooLarge, "request body larger than 4 MiB"))
}

// restHandler forwards a REST call to m's subject.
func (g *Gateway) restHandler(m *api.Meta) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req := g.envelope(r)
		req.Args = objectOrEmpty(r.Context().Value(bodyKey{}).([]byte))
		if rc := chi.RouteContext(r.Context()); rc != nil {
			for i, k := range rc.URLParams.Keys {
				if k == "*" {
					continue
				}
				if req.Params == nil {
					req.Params = map[string]string{}
				}
				req.Params[k] = rc.URLParams.Values[i]
			}
		}
		g.forward(w, r, m, req)
	}
}

// actionHandler serves GET /api?action=<name>: every parameter is in the
// query string, and the call becomes the same envelope as the REST form.
func (g *Gateway) actionHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("action")
	m, ok := g.actions[name]
	if !ok {
		writeError(w, apierr.BadRequest("Unknown action").With("actions", g.actionNames()))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		writeError(w, apierr.New(apierr.KindMethodNotAllowed,
			"the action API takes GET (or POST): GET /api?action=%s", name).With("allowed", []string{"GET /api", "POST /api"}))
		return
	}
	if m.ActionPOSTOnly && r.Method != http.MethodPost {
		writeError(w, apierr.New(apierr.KindMethodNotAllowed,
			"%s is not allowed: action %s takes POST only: POST /api?action=%s", r.Method, name, name).With("allowed", []string{"POST /api?action=" + name}))
		return
	}
	req := g.envelope(r)
	req.Method, req.Action = actionMethod(m), name
	args := map[string]any{}
	for k, v := range q {
		if k == "action" || k == "api_key" || len(v) == 0 {
			continue
		}
		args[k] = v[len(v)-1]
	}
	// A POST action's JSON body fills the arguments too, its fields winning
	// over the query's (the spec's saved configuration versions).
	if r.Method == http.MethodPost {
		var body map[string]any
		if json.Unmarshal(r.Context().Value(bodyKey{}).([]byte), &body) == nil {
			for k, v := range body {
				if k != "action" && k != "api_key" {
					args[k] = v
				}
			}
		}
	}
	req.Args, _ = json.Marshal(args)
	req.Path = "/api"
	// The query stays in the envelope (without action): a service can tell
	// what came in the URL from what came in a POST body (OLT credentials
	// are refused in a URL, Document 1).
	req.Query.Del("action")
	g.forward(w, r, m, req)
}

func (g *Gateway) envelope(r *http.Request) *pb.Request {
	q := r.URL.Query()
	q.Del("api_key")
	req := &pb.Request{
		Method:    r.Method,
		Path:      r.URL.Path,
		Query:     q,
		Caller:    r.Context().Value(callerKey{}).(string),
		RequestID: newRequestID(),
	}
	// Document 3's OLT choice may come in X-OLT-* headers (credentials
	// never in a URL); no other header travels to the services.
	for k, v := range r.Header {
		if strings.HasPrefix(k, "X-Olt-") && len(v) > 0 {
			if req.Headers == nil {
				req.Headers = map[string]string{}
			}
			req.Headers[k] = v[0]
		}
	}
	return req
}

// byPattern is the spec's rule for `by`: letters, digits, _ . @ -, at most 64.
var byPattern = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`)

func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, m *api.Meta, req *pb.Request) {
	by := argString(req.Args, "by")
	if by == "" {
		by = r.URL.Query().Get("by")
	}
	if by != "" && !byPattern.MatchString(by) {
		writeError(w, apierr.Invalid("by", "by must be 1-64 letters, digits, _ . @ or -"))
		return
	}
	req.By = by
	w.Header().Set("X-Request-Id", req.RequestID)
	// CallOp bounds the call by the operation's timeout.
	rep, err := bus.CallOp(r.Context(), g.cfg.NC, m, req)
	if err != nil {
		ae := apierr.From(err)
		g.cfg.Log.Error("bus call failed", "subject", m.Subject(), "request_id", req.RequestID, "err", err)
		writeError(w, ae)
		return
	}
	if obj := rep.Headers[api.ArchiveObjectHeader]; obj != "" && rep.Status < 300 {
		g.writeObject(w, r, rep, obj) // a large archive, through the object store
		return
	}
	writeReply(w, rep)
}

func writeReply(w http.ResponseWriter, rep *pb.Reply) {
	for k, v := range rep.Headers {
		w.Header().Set(k, v)
	}
	if rep.ContentType != "" {
		w.Header().Set("Content-Type", rep.ContentType)
		w.WriteHeader(rep.Status)
		_, _ = w.Write(rep.Body)
		return
	}
	out, err := jsonout.Reindent(rep.Body)
	if err != nil {
		writeError(w, apierr.Internal(err.Error(), "service sent an unreadable answer"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.Status)
	_, _ = w.Write(out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	out, err := jsonout.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		out = []byte("{\n    \"error\": \"cannot encode answer\"\n}\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

func writeError(w http.ResponseWriter, e *apierr.Error) { writeJSON(w, e.Status(), e.Body()) }

// usage answers a path that is no API resource: 200 with the summary.
func (g *Gateway) usage(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"api":       proto.Banner,
		"auth":      "send the API key in the X-API-Key header (or api_key in the query)",
		"endpoints": g.forms,
		"actions":   g.actionNames(),
		"action":    "GET /api?action=<name>&<parameters>",
	})
}

// methodNotAllowed answers 405 with the forms the path does take.
func (g *Gateway) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var valid []string
	for _, f := range g.forms {
		_, pattern, _ := strings.Cut(f, " ")
		if matchPattern(pattern, r.URL.Path) {
			valid = append(valid, f)
		}
	}
	writeError(w, apierr.New(apierr.KindMethodNotAllowed,
		"%s is not allowed here; valid: %s", r.Method, strings.Join(valid, ", ")).With("allowed", valid))
}

func (g *Gateway) actionNames() []string {
	names := make([]string, 0, len(g.actions))
	for n := range g.actions {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func matchPattern(pattern, path string) bool {
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(path, "/"), "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if strings.HasPrefix(ps[i], "{") {
			continue
		}
		if ps[i] != xs[i] {
			return false
		}
	}
	return true
}

// objectOrEmpty keeps a body that is a JSON object; anything else counts as
// empty, as the spec says.
// (Checked without decoding: the service decodes the arguments once.)
func objectOrEmpty(body []byte) json.RawMessage {
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(body)
}

// argString reads one string argument; the object is decoded only when
// the name appears in it at all.
func argString(raw json.RawMessage, name string) string {
	if !bytes.Contains(raw, []byte(`"`+name+`"`)) {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[name], &s) != nil {
		return ""
	}
	return s
}

func callerAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Serve runs the HTTP server on l until ctx ends, then shuts down
// gracefully, letting running requests finish for up to 10 s.
func (g *Gateway) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      6 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
