package bus

// Subject prefix of every operation: router.<service>.<resource>.<verb>.
const Prefix = "router"

// Subjects of the operations that exist today. The gateway's route table
// maps REST paths and action names onto these; a service declares an
// endpoint for each of its own.
const (
	PlansList   = "router.subscribers.plans.list"
	PlansPut    = "router.subscribers.plans.put"
	PlansDelete = "router.subscribers.plans.delete"
	// ClientsSummary answers the client counts GET /status shows.
	ClientsSummary = "router.subscribers.clients.summary"

	RoutesList   = "router.netcfg.routes.list"
	RoutesCreate = "router.netcfg.routes.create"
	RoutesDelete = "router.netcfg.routes.delete"
	// InterfacesCount answers how many interfaces the target namespace has.
	InterfacesCount = "router.netcfg.interfaces.count"

	StatusGet = "router.system.status.get"
)

// Queue groups: one per resource, so replicas of a service share the load
// of each resource independently.
const QueueGroup = "router"
