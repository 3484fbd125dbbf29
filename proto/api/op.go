package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"
)

// SubjectPrefix begins every operation's subject: router.<service>.<name>.
const SubjectPrefix = "router"

// DefaultTimeout bounds an operation that declares no timeout of its own,
// from the gateway's bus request down to the service's context. It is the
// only default: callers, services and the gateway all read it from here.
const DefaultTimeout = 15 * time.Second

// DefaultAttempt is how long a read waits for one replica before asking
// again (another replica may answer): a replica killed mid-request never
// answers, and a read must not fail for it.
const DefaultAttempt = 3 * time.Second

// DefaultConcurrency is how many requests of one operation a replica works
// on at once. More wait in the bus's queue; a request that waited past its
// deadline is refused with a 503 rather than worked on for nobody.
const DefaultConcurrency = 8

// AnyMethod is the Method of a REST form that takes every method the path
// has no form of its own for (the spec's "GET /plans (any method other
// than POST and DELETE)").
const AnyMethod = "*"

// REST is one HTTP form of an operation.
type REST struct {
	// Method is GET, POST, PUT, DELETE or AnyMethod.
	Method string
	// Path is a chi pattern; {name} segments are path parameters that fill
	// the request field of that name.
	Path string
}

// Meta describes one operation: everything the gateway, the bus adapter,
// the typed clients and the API reference need, declared once.
type Meta struct {
	// Service owns the operation (and its etcd prefix and kernel state).
	Service string
	// Name is <resource>.<verb>, e.g. "plans.put"; the subject is
	// router.<Service>.<Name>.
	Name string
	// Summary is the operation's one-line description for the reference,
	// with the choices made where the spec says "not shown".
	Summary string
	// REST lists the HTTP forms; none for operations only services call.
	REST []REST
	// Action is the /api?action= name; empty when there is no action form.
	Action string
	// ActionPOSTOnly makes the action form refuse every method but POST
	// with a 405 (the spec's config-save: "POST only (GET = 405)"). A POST
	// action's JSON body fills its arguments, winning over the query.
	ActionPOSTOnly bool
	// Status is the HTTP status of success; 0 is 200. An answer embedding
	// Result may choose another by setting Code (e.g. 200 for an update
	// of a create-or-replace whose Status is 201).
	Status int
	// Event is the kind published on router.events.<Service>.<kind> after
	// a success; an answer implementing Evented may override it.
	Event string
	// Read marks an operation that changes nothing: callers may ask again
	// when a replica does not answer within Attempt.
	Read bool
	// Timeout bounds the whole operation; 0 is DefaultTimeout.
	Timeout time.Duration
	// Attempt bounds one try of a read; 0 is DefaultAttempt.
	Attempt time.Duration
	// Concurrency is how many requests one replica works on at once; 0 is
	// DefaultConcurrency.
	Concurrency int

	req, resp reflect.Type
	schema    *Schema
}

// Subject is the bus subject the operation travels on.
func (m *Meta) Subject() string { return SubjectPrefix + "." + m.Service + "." + m.Name }

// Internal reports an operation with neither a REST nor an action form.
func (m *Meta) Internal() bool { return len(m.REST) == 0 && m.Action == "" }

// SuccessStatus is Status with its default filled in.
func (m *Meta) SuccessStatus() int {
	if m.Status == 0 {
		return http.StatusOK
	}
	return m.Status
}

// TimeoutOrDefault is Timeout with its default filled in.
func (m *Meta) TimeoutOrDefault() time.Duration {
	if m.Timeout == 0 {
		return DefaultTimeout
	}
	return m.Timeout
}

// AttemptOrDefault is how long one try of a read may take: Attempt, or
// DefaultAttempt, never more than the whole Timeout.
func (m *Meta) AttemptOrDefault() time.Duration {
	a := m.Attempt
	if a == 0 {
		a = DefaultAttempt
	}
	return min(a, m.TimeoutOrDefault())
}

// ConcurrencyOrDefault is Concurrency with its default filled in.
func (m *Meta) ConcurrencyOrDefault() int {
	if m.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return m.Concurrency
}

// Request is the schema of the operation's request type.
func (m *Meta) Request() *Schema { return m.schema }

// RequestType and AnswerType are the Go types of the request and answer.
func (m *Meta) RequestType() reflect.Type { return m.req }
func (m *Meta) AnswerType() reflect.Type  { return m.resp }

// Describe returns the operation's description (the Operation interface).
func (m *Meta) Describe() *Meta { return m }

// Operation is any operation of the table, whatever its types.
type Operation interface{ Describe() *Meta }

// Op is an operation whose request is a Req and whose answer is a Resp.
// The types are what make bindings and clients typed: a service binds an
// Op to a method func(context.Context, *Req) (*Resp, error), and a caller
// gets a *Resp back.
type Op[Req, Resp any] struct{ *Meta }

// Define declares an operation. It panics when the request type's field
// rules do not parse: the table is fixed at compile time, so that is a
// programming error found by any test that loads the package.
func Define[Req, Resp any](m Meta) Op[Req, Resp] {
	m.req = reflect.TypeFor[Req]()
	m.resp = reflect.TypeFor[Resp]()
	s, err := schemaOf(m.req)
	if err != nil {
		panic(fmt.Sprintf("api: operation %s.%s: %v", m.Service, m.Name, err))
	}
	m.schema = s
	return Op[Req, Resp]{&m}
}

// Decode fills req from an argument object (see the package doc for the
// sources and the lenient forms) and checks every rule; the error is a
// *FieldError naming the first field at fault.
func (o Op[Req, Resp]) Decode(args map[string]json.RawMessage, req *Req) error {
	return o.schema.decode(args, reflect.ValueOf(req).Elem())
}

// Result is the `{ok, code, message}` head of a change's answer. Embed it;
// the bus adapter sets OK and Code from the operation's status.
type Result struct {
	OK      bool   `json:"ok"`
	Code    int    `json:"code"`
	Message string `json:"message,omitempty"`
}

// Outcome gives the adapter the embedded Result.
func (r *Result) Outcome() *Result { return r }

// Outcomer is an answer with a Result head.
type Outcomer interface{ Outcome() *Result }

// Evented is an answer that says which event it publishes (the kind, ""
// for none) and with what data, instead of the operation's Event with the
// whole answer as data.
type Evented interface {
	EventOf() (kind string, data any)
}

// None is the request of an operation that takes no arguments.
type None struct{}

// Origin says who asked: the HTTP caller, the operator's `by`, the request
// id. The bus adapter puts it in the context of every operation, so domain
// code can log and refuse by it (e.g. "the address the caller came to")
// without knowing of HTTP.
type Origin struct {
	Caller    string
	By        string
	RequestID string
	// Action is the action name when the call came through /api?action=
	// (a few rules differ there, e.g. ip-add's force).
	Action string
}

// String renders "by@caller", or the caller alone.
func (o Origin) String() string {
	if o.By != "" {
		return o.By + "@" + o.Caller
	}
	return o.Caller
}

type originKey struct{}

// WithOrigin returns ctx carrying o.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginOf returns the origin in ctx (zero when none).
func OriginOf(ctx context.Context) Origin {
	o, _ := ctx.Value(originKey{}).(Origin)
	return o
}

// PathParams lists the {name} segments of a chi pattern.
func PathParams(pattern string) []string {
	var out []string
	for _, s := range strings.Split(pattern, "/") {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			out = append(out, strings.Trim(s, "{}"))
		}
	}
	return out
}
