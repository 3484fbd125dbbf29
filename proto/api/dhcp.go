package api

import (
	"net/netip"
	"time"
)

// The dhcp service. Its operations are not on the HTTP API yet (the
// served-networks issue puts them there); services and tools call them.

// Lease is one binding of an address or prefix to a client.
type Lease struct {
	Kind      string     `json:"kind" doc:"v4, v6na (DHCPv6 address) or v6pd (delegated prefix)"`
	Addr      netip.Addr `json:"addr"`
	PrefixLen int        `json:"prefix_len,omitempty" doc:"delegated prefix length (v6pd)"`
	Iface     string     `json:"iface"`
	MAC       string     `json:"mac,omitempty"`
	ClientID  string     `json:"client_id,omitempty" doc:"DHCPv4 option 61, hex"`
	DUID      string     `json:"duid,omitempty" doc:"hex"`
	IAID      uint32     `json:"iaid,omitempty"`
	Hostname  string     `json:"hostname,omitempty"`
	State     string     `json:"state" doc:"offered, bound or declined"`
	Start     time.Time  `json:"start"`
	End       time.Time  `json:"end"`
	CircuitID string     `json:"circuit_id,omitempty" doc:"option 82 circuit id"`
	RemoteID  string     `json:"remote_id,omitempty" doc:"option 82 remote id"`
	Via       netip.Addr `json:"via,omitzero" doc:"next hop of a delegated prefix's route"`
}

// LeaseFilter selects leases; paged by limit and after.
type LeaseFilter struct {
	Iface string `json:"iface" doc:"served interface"`
	Kind  string `json:"kind" api:"enum=v4|v6na|v6pd"`
	State string `json:"state" api:"enum=offered|bound|declined"`
	MAC   string `json:"mac" api:"format=mac"`
	Limit int    `json:"limit" api:"min=1,max=1000,default=1000" doc:"page size"`
	After string `json:"after" doc:"the previous page's next"`
}

// LeaseList is one page of leases, sorted by key.
type LeaseList struct {
	Count  int     `json:"count"`
	Total  int     `json:"total" doc:"leases matching the filter, all pages"`
	Leases []Lease `json:"leases"`
	Next   string  `json:"next,omitempty" doc:"pass as after for the next page; absent on the last"`
}

// LeaseRef names the lease on one address or delegated prefix.
type LeaseRef struct {
	Address string `json:"address" api:"required,format=cidr" doc:"an address, or a delegated prefix"`
}

// LeaseAnswer is one lease.
type LeaseAnswer struct {
	Lease Lease `json:"lease"`
}

// PDSyncRequest runs the delegated-route reconciler.
type PDSyncRequest struct {
	Dry bool `json:"dry" doc:"only report what would change"`
}

// PDSyncAnswer lists what the reconciler did (or would do).
type PDSyncAnswer struct {
	Result
	DryRun bool     `json:"dry_run"`
	Output []string `json:"output"`
}

// DHCPState is the engine's state: the configuration in force (without
// its per-subscriber lists, which can run to 100,000 entries; Counts says
// how long they are), the last refused one, lease counts by kind/state,
// event and per-socket counters.
type DHCPState struct {
	Config    any            `json:"config"`
	InForce   any            `json:"in_force"`
	Counts    map[string]int `json:"counts"`
	Leases    map[string]int `json:"leases"`
	Events    any            `json:"events"`
	Listeners any            `json:"listeners"`
}

var (
	// LeasesList lists leases.
	LeasesList = Define[LeaseFilter, LeaseList](Meta{
		Service: "dhcp", Name: "leases.list",
		Summary: "Leases, filtered by iface, kind, state and mac, paged by limit (at most 1000) and after.", Read: true,
	})
	// LeasesGet looks up the lease on one address or delegated prefix.
	LeasesGet = Define[LeaseRef, LeaseAnswer](Meta{
		Service: "dhcp", Name: "leases.get",
		Summary: "The lease on one address or delegated prefix; 404 when there is none.", Read: true,
	})
	// PDSync runs the delegated-route reconciler.
	PDSync = Define[PDSyncRequest, PDSyncAnswer](Meta{
		Service: "dhcp", Name: "pd.sync",
		Summary: "Reconcile delegated-prefix routes with the leases (dry only reports).",
	})
	// DHCPStatus is the engine's state.
	DHCPStatus = Define[None, DHCPState](Meta{
		Service: "dhcp", Name: "status.get",
		Summary: "The engine's state: configuration in force and refused, lease, event and listener counters.", Read: true,
	})
)
