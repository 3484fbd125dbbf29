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

	// DHCPLeasesList lists leases (filters iface, kind, state, mac; paged
	// with limit and after).
	DHCPLeasesList = "router.dhcp.leases.list"
	// DHCPLeasesGet looks up the lease on one address or delegated prefix.
	DHCPLeasesGet = "router.dhcp.leases.get"
	// DHCPPDSync runs the delegated-route reconciler (/pd/sync; dry only reports).
	DHCPPDSync = "router.dhcp.pd.sync"
	// DHCPStatusGet answers the engine's state: configuration in force,
	// the last refused one, lease and event counts.
	DHCPStatusGet = "router.dhcp.status.get"
)

// Queue groups: one per resource, so replicas of a service share the load
// of each resource independently.
const QueueGroup = "router"
