// Package bus holds the wire contract of the message bus: the request
// envelope the gateway puts on a subject, the reply a service sends back,
// and the names of the subjects.
package bus

import (
	"encoding/json"
	"net/url"
)

// Request is what the gateway sends a service for one HTTP call. The REST
// form and the action form (`/api?action=`) of an operation produce the same
// envelope: for the action form the query parameters are copied into Args,
// so the service cannot tell them apart and runs the same code.
type Request struct {
	// Method is the HTTP method ("GET", "POST", ...).
	Method string `json:"method"`
	// Path is the request path with trailing slashes removed, e.g. "/plans/gold".
	Path string `json:"path"`
	// Params are the path parameters by name, e.g. {"name": "gold"}.
	Params map[string]string `json:"params,omitempty"`
	// Query is the query string, api_key removed.
	Query url.Values `json:"query,omitempty"`
	// Args is a JSON object: the request body when it was a JSON object,
	// otherwise `{}`; for the action form, the query parameters as strings.
	Args json.RawMessage `json:"args,omitempty"`
	// Caller is the remote address of the HTTP client (no port).
	Caller string `json:"caller"`
	// By is the operator's user name when the caller sent one (`by`).
	By string `json:"by,omitempty"`
	// RequestID identifies the request in logs across services.
	RequestID string `json:"request_id"`
	// Action is the action name when the call came through /api?action=.
	Action string `json:"action,omitempty"`
	// Headers are the request's X-OLT-* headers (Document 3's OLT choice),
	// by canonical name ("X-Olt-Name"); no other header is carried.
	Headers map[string]string `json:"headers,omitempty"`
}

// Reply is a service's answer: the HTTP status and the body the gateway
// writes (a JSON body re-indented). On the bus the head travels as message
// headers and the body as the message's data, as it is (shared/bus
// EncodeReply/DecodeReply): no second encoding of a large body.
type Reply struct {
	Status int
	// ContentType is empty for JSON; set for binary answers (PNG, gzip).
	ContentType string
	// Headers are extra response headers (e.g. Content-Disposition).
	Headers map[string]string
	// Body is the JSON document, or the raw bytes when ContentType is set.
	Body []byte
}
