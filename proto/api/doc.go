// Package api is the operation table of the router's API: each operation
// declared once, with its subject, its REST and action forms, its typed
// request (with the spec's field rules as struct tags) and answer, the event
// it publishes and its timeout. From this one table the gateway mounts the
// HTTP forms, services bind operations to domain methods (shared/bus.Bind),
// services call each other (shared/bus.Invoke), and docs/openapi.yaml is
// generated (gateway/openapi).
//
// # Arguments
//
// An operation's arguments are one JSON object, filled from three sources
// in order, the first that has a field winning: the JSON body (a body that
// is not an object counts as empty), the query string, the path
// parameters. The action form (/api?action=) has only its query, every
// value a string. Decoding is lenient the same way for every source, so
// both forms validate identically: an integer may come as 5 or "5", a
// boolean as true, "1", "on" or "yes", a list as a JSON array or one
// comma-separated string; null and "" count as not sent.
//
// # Field rules
//
// In the request struct's tags:
//
//	json:"name"          the argument's name
//	api:"required"       must be sent and not empty
//	api:"min=1,max=100"  numeric range
//	api:"maxlen=200"     string length in characters (also minlen)
//	api:"enum=a|b"       one of these values
//	api:"format=mac"     one of Formats (ip, ipv4, ipv6, cidr, mac)
//	api:"alias=pass"     also accepted under this name
//	api:"default=30"     used when not sent
//	api:"notrim"         keep leading and trailing spaces
//	pattern:"^re$"       must match; hint:"..." says what is wanted
//	doc:"..."            description for the reference
//
// Rules that span fields go in a Validate() error method on the request
// type. A broken rule is a *FieldError, answered 400 with `field`.
//
// # Adding an operation
//
// One table entry, one domain method, one binding line:
//
//	// proto/api/subscribers.go
//	type PlanRef struct {
//		Name string `json:"name" api:"required"`
//	}
//	var PlansGet = Define[PlanRef, Plan](Meta{
//		Service: "subscribers", Name: "plans.get",
//		REST: []REST{{"GET", "/plans/{name}"}}, Action: "plan-get", Read: true,
//	})
//	// ... and PlansGet in Table.
//
//	// services/subscribers/plan: the domain method, no HTTP in sight
//	func (b *Book) Get(ctx context.Context, r *api.PlanRef) (*api.Plan, error)
//
//	// services/subscribers: the binding
//	bus.Bind(api.PlansGet, s.plans.Get),
//
// then `make openapi`. Domain errors come from shared/apierr (invalid with
// the field, not found, conflict, exhausted, upstream refused,
// unavailable, internal); the status is chosen once, in the adapter.
package api
