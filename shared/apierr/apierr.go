// Package apierr is the closed set of API errors. Domain code returns these
// (wrapped or not); the bus adapter turns them into a reply once, so the
// status, the `error` text and the extra fields are decided in one place.
package apierr

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an API error: an HTTP status, a message, and extra fields that go
// into the error body beside `error`, `ok` and `code` (e.g. `field`,
// `clients`, `broken_data_files`).
type Error struct {
	Status  int
	Message string
	Fields  map[string]any
}

func (e *Error) Error() string { return e.Message }

// With returns a copy of e with one more field in the body.
func (e *Error) With(key string, value any) *Error {
	c := &Error{Status: e.Status, Message: e.Message, Fields: map[string]any{}}
	for k, v := range e.Fields {
		c.Fields[k] = v
	}
	c.Fields[key] = value
	return c
}

// Body renders the error as the spec's error body.
func (e *Error) Body() map[string]any {
	b := map[string]any{"ok": false, "code": e.Status, "error": e.Message}
	for k, v := range e.Fields {
		b[k] = v
	}
	return b
}

func newf(status int, format string, a ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, a...)}
}

// Invalid is a 400 about one request field; the body names the field.
func Invalid(field, format string, a ...any) *Error {
	return newf(http.StatusBadRequest, format, a...).With("field", field)
}

// BadRequest is a 400 not tied to one field.
func BadRequest(format string, a ...any) *Error { return newf(http.StatusBadRequest, format, a...) }

// NotFound is a 404.
func NotFound(format string, a ...any) *Error { return newf(http.StatusNotFound, format, a...) }

// Conflict is a 409.
func Conflict(format string, a ...any) *Error { return newf(http.StatusConflict, format, a...) }

// Internal is a 500; detail, when not empty, goes in the `detail` field.
func Internal(detail string, format string, a ...any) *Error {
	e := newf(http.StatusInternalServerError, format, a...)
	if detail != "" {
		e = e.With("detail", detail)
	}
	return e
}

// Unavailable is a 503: the service that owns the operation did not answer.
func Unavailable(format string, a ...any) *Error {
	return newf(http.StatusServiceUnavailable, format, a...)
}

// Broken is the 500 for unparsable stored configuration documents; the
// spec requires the damaged documents to be listed in broken_data_files.
func Broken(docs []string) *Error {
	return newf(http.StatusInternalServerError, "stored configuration cannot be read").With("broken_data_files", docs)
}

// From finds the API error in err's chain. Anything else is an internal
// error whose text is kept out of the answer's `error` but given as detail.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var b interface{ BrokenDocuments() []string }
	if errors.As(err, &b) {
		return Broken(b.BrokenDocuments())
	}
	return Internal(err.Error(), "internal error")
}
