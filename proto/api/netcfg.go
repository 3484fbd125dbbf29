package api

import "routerd.dev/proto/event"

// The netcfg service (Document 2: static routes; VLANs, addresses and the
// network document to come).

// Route is one managed static route.
type Route struct {
	Prefix  string `json:"prefix" doc:"CIDR, or default" example:"10.50.0.0/16"`
	Via     string `json:"via" example:"198.18.0.1"`
	Dev     string `json:"dev"`
	Family  string `json:"family" doc:"ipv4 or ipv6"`
	Comment string `json:"comment"`
	Created string `json:"created" example:"2026-11-24 10:00:00"`
}

// RouteList answers GET /routes.
type RouteList struct {
	Count   int     `json:"count" doc:"managed routes"`
	Managed []Route `json:"managed"`
	// LiveIPv4 and LiveIPv6 are the kernel's main table, one route a line
	// as `ip route` prints it.
	LiveIPv4 []string `json:"live_ipv4"`
	LiveIPv6 []string `json:"live_ipv6"`
}

// RouteAdd is POST /routes.
type RouteAdd struct {
	Prefix  string `json:"prefix" api:"required" doc:"CIDR or default; a bare address is a host route; host bits set is refused with the masked prefix suggested" example:"10.50.0.0/16"`
	Via     string `json:"via" api:"format=ip" doc:"gateway; via and/or dev is required" example:"198.18.0.1"`
	Dev     string `json:"dev" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
	Comment string `json:"comment" api:"maxlen=200"`
}

// Validate asks for a next hop: a gateway, an interface, or both.
func (r *RouteAdd) Validate() error {
	if r.Via == "" && r.Dev == "" {
		return &FieldError{Field: "via", Message: "via and/or dev is required"}
	}
	return nil
}

// RouteAnswer answers POST /routes.
type RouteAnswer struct {
	Result
	Route Route `json:"route"`
}

// EventOf publishes route.created with the route.
func (a *RouteAnswer) EventOf() (string, any) { return event.RouteCreated, a.Route }

// RouteDel is DELETE /routes: the first managed route with the prefix,
// narrowed by via and dev when given.
type RouteDel struct {
	Prefix string `json:"prefix" api:"required" doc:"as added (CIDR or default)"`
	Via    string `json:"via" api:"format=ip"`
	Dev    string `json:"dev" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
}

// RouteDeleteAnswer answers DELETE /routes.
type RouteDeleteAnswer struct {
	Result
	Route Route `json:"route"`
	// KernelRemoved is false when the kernel no longer had the route.
	KernelRemoved bool `json:"kernel_removed"`
}

// EventOf publishes route.deleted with the route.
func (a *RouteDeleteAnswer) EventOf() (string, any) { return event.RouteDeleted, a.Route }

// InterfaceCount is the router namespace's interface count.
type InterfaceCount struct {
	Interfaces int `json:"interfaces"`
}

var (
	// RoutesList is GET /routes.
	RoutesList = Define[None, RouteList](Meta{
		Service: "netcfg", Name: "routes.list",
		Summary: "Managed static routes, and the kernel's main tables as `ip route` prints them.",
		REST:    []REST{{"GET", "/routes"}}, Action: "route-list", Read: true,
	})
	// RoutesCreate is POST /routes.
	RoutesCreate = Define[RouteAdd, RouteAnswer](Meta{
		Service: "netcfg", Name: "routes.create",
		Summary: "Add a static route (201 'Route added'): installed in the kernel and stored; 409 when already managed; 500 with `detail` when the kernel refuses it.",
		REST:    []REST{{"POST", "/routes"}}, Action: "route-add", Status: 201,
		Event: event.RouteCreated,
	})
	// RoutesDelete is DELETE /routes.
	RoutesDelete = Define[RouteDel, RouteDeleteAnswer](Meta{
		Service: "netcfg", Name: "routes.delete",
		Summary: "Remove the first managed route with `prefix` (narrowed by `via`, `dev`); 404 when none is managed. `kernel_removed` is false when the kernel no longer had it.",
		REST:    []REST{{"DELETE", "/routes"}}, Action: "route-del",
		Event: event.RouteDeleted,
	})
	// InterfacesCount gives GET /status its interface count.
	InterfacesCount = Define[None, InterfaceCount](Meta{
		Service: "netcfg", Name: "interfaces.count",
		Summary: "Interface count for GET /status.", Read: true,
	})
)
