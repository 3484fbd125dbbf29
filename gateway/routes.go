package gateway

import (
	"time"

	pb "routerd.dev/proto/bus"
)

// Route maps one REST form, and its action name when it has one, onto the
// subject of the service that runs it. The REST and the action form of an
// operation therefore reach the same subject and the same code.
type Route struct {
	// Method is the HTTP method; AnyOther matches every method the path
	// has no route of its own for (the spec's "GET /plans (any method other
	// than POST and DELETE)").
	Method string
	// Pattern is the chi path pattern.
	Pattern string
	// Subject is the bus subject that serves it.
	Subject string
	// Action is the /api?action= name, empty when there is no action form.
	Action string
	// Timeout bounds the bus request; zero means DefaultTimeout.
	Timeout time.Duration
}

// AnyOther is the Method of a route that takes every method not routed
// otherwise on its path.
const AnyOther = "*"

// DefaultTimeout bounds a bus request for routes that do not set one.
const DefaultTimeout = 60 * time.Second

// Routes is the whole API the gateway serves, in one readable place. Only
// operations that really exist are here: an action or path missing from this
// table is answered as unknown, never routed to a service that is not built.
var Routes = []Route{
	// System (Document 1).
	{Method: "GET", Pattern: "/status", Subject: pb.StatusGet, Action: "status"},

	// Plans (Document 2).
	{Method: "GET", Pattern: "/plans", Subject: pb.PlansList, Action: "plan-list"},
	{Method: AnyOther, Pattern: "/plans", Subject: pb.PlansList},
	{Method: "POST", Pattern: "/plans", Subject: pb.PlansPut, Action: "plan-add"},
	{Method: "DELETE", Pattern: "/plans", Subject: pb.PlansDelete},
	{Method: "DELETE", Pattern: "/plans/{name}", Subject: pb.PlansDelete, Action: "plan-del"},

	// Static routes (Document 2).
	{Method: "GET", Pattern: "/routes", Subject: pb.RoutesList, Action: "route-list"},
	{Method: "POST", Pattern: "/routes", Subject: pb.RoutesCreate, Action: "route-add"},
	{Method: "DELETE", Pattern: "/routes", Subject: pb.RoutesDelete, Action: "route-del"},
}
