// Package apierr is the closed set of API errors. Domain code returns these
// (wrapped or not) by kind, knowing nothing of HTTP; the HTTP status of each
// kind is decided here, once, and the bus adapter turns an error into an
// answer in one place, so the status, the `error` text and the extra fields
// are the same for every operation.
package apierr

import (
	"errors"
	"fmt"
	"net/http"

	"routerd.dev/proto/api"
)

// Kind is what went wrong, in terms a caller can act on.
type Kind int

// The kinds. Domain code uses the first seven; the last three are the
// gateway's own (authentication, method, body size).
const (
	// KindInternal: the router could not complete the change (500); the
	// detail field says what failed underneath.
	KindInternal Kind = iota
	// KindInvalid: a parameter is missing or invalid (400); `field` names it.
	KindInvalid
	// KindNotFound: the thing named does not exist (404).
	KindNotFound
	// KindConflict: it exists already, a dependency prevents the change, or
	// a version is stale (409); extra fields say with what.
	KindConflict
	// KindExhausted: a pool or table is full (507).
	KindExhausted
	// KindUpstream: a device or daemon the router drives refused (502).
	KindUpstream
	// KindUnavailable: the service that owns the operation is not running,
	// busy, or did not answer in time (503): try again.
	KindUnavailable
	KindUnauthorized
	KindMethodNotAllowed
	KindTooLarge
)

// statuses is the one place where a kind becomes an HTTP status.
var statuses = [...]int{
	KindInternal:         http.StatusInternalServerError,
	KindInvalid:          http.StatusBadRequest,
	KindNotFound:         http.StatusNotFound,
	KindConflict:         http.StatusConflict,
	KindExhausted:        http.StatusInsufficientStorage,
	KindUpstream:         http.StatusBadGateway,
	KindUnavailable:      http.StatusServiceUnavailable,
	KindUnauthorized:     http.StatusUnauthorized,
	KindMethodNotAllowed: http.StatusMethodNotAllowed,
	KindTooLarge:         http.StatusRequestEntityTooLarge,
}

// Status is the HTTP status of the kind.
func (k Kind) Status() int { return statuses[k] }

// KindOf is the kind an HTTP status stands for (a typed client reading a
// service's error answer); statuses outside the set are internal.
func KindOf(status int) Kind {
	for k, s := range statuses {
		if s == status {
			return Kind(k)
		}
	}
	return KindInternal
}

// Error is an API error: a kind, a message, and extra fields that go into
// the error body beside `error`, `ok` and `code` (e.g. `field`, `clients`,
// `broken_data_files`).
type Error struct {
	Kind    Kind
	Message string
	Fields  map[string]any
}

func (e *Error) Error() string { return e.Message }

// Status is the HTTP status of the error.
func (e *Error) Status() int { return e.Kind.Status() }

// With returns a copy of e with one more field in the body.
func (e *Error) With(key string, value any) *Error {
	c := &Error{Kind: e.Kind, Message: e.Message, Fields: make(map[string]any, len(e.Fields)+1)}
	for k, v := range e.Fields {
		c.Fields[k] = v
	}
	c.Fields[key] = value
	return c
}

// Body renders the error as the spec's error body.
func (e *Error) Body() map[string]any {
	b := map[string]any{"ok": false, "code": e.Status(), "error": e.Message}
	for k, v := range e.Fields {
		b[k] = v
	}
	return b
}

// New is an error of kind k.
func New(k Kind, format string, a ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, a...)}
}

// Invalid is a parameter that is missing or wrong; the body names the field.
func Invalid(field, format string, a ...any) *Error {
	return New(KindInvalid, format, a...).With("field", field)
}

// BadRequest is an invalid request not tied to one field.
func BadRequest(format string, a ...any) *Error { return New(KindInvalid, format, a...) }

// NotFound is a thing that does not exist.
func NotFound(format string, a ...any) *Error { return New(KindNotFound, format, a...) }

// Conflict is a change that collides with what exists.
func Conflict(format string, a ...any) *Error { return New(KindConflict, format, a...) }

// Exhausted is a pool or table with no room left.
func Exhausted(format string, a ...any) *Error { return New(KindExhausted, format, a...) }

// Upstream is a device or daemon that refused; detail, when not empty, is
// what it said.
func Upstream(detail string, format string, a ...any) *Error {
	e := New(KindUpstream, format, a...)
	if detail != "" {
		e = e.With("detail", detail)
	}
	return e
}

// Internal is a change the router could not complete; detail, when not
// empty, goes in the `detail` field.
func Internal(detail string, format string, a ...any) *Error {
	e := New(KindInternal, format, a...)
	if detail != "" {
		e = e.With("detail", detail)
	}
	return e
}

// Unavailable is an owner that is not running, busy, or did not answer.
func Unavailable(format string, a ...any) *Error { return New(KindUnavailable, format, a...) }

// Broken is the 500 for unparsable stored configuration documents; the
// spec requires the damaged documents to be listed in broken_data_files.
func Broken(docs []string) *Error {
	return New(KindInternal, "stored configuration cannot be read").With("broken_data_files", docs)
}

// From finds the API error in err's chain. A request field that breaks its
// rule (api.FieldError) is invalid with the field; anything else is an
// internal error whose text is kept out of `error` but given as detail.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var fe *api.FieldError
	if errors.As(err, &fe) {
		return Invalid(fe.Field, "%s", fe.Message)
	}
	var b interface{ BrokenDocuments() []string }
	if errors.As(err, &b) {
		return Broken(b.BrokenDocuments())
	}
	return Internal(err.Error(), "internal error")
}
