// Package event defines the events services publish on
// router.events.<service>.<kind>. A JetStream stream named Stream keeps them
// so the OLT monitor can tap and replay.
package event

import (
	"encoding/json"
	"time"
)

// Stream is the JetStream stream that stores every event.
const Stream = "ROUTER_EVENTS"

// SubjectPrefix is the prefix of every event subject.
const SubjectPrefix = "router.events"

// Subject returns the subject an event of kind from service is published on.
func Subject(service, kind string) string {
	return SubjectPrefix + "." + service + "." + kind
}

// Event is one change or observation.
type Event struct {
	Time    time.Time `json:"time"`
	Service string    `json:"service"`
	// Kind is e.g. "plan.created", "route.deleted", "lease.granted".
	Kind string `json:"kind"`
	// Caller and By say who caused a change (empty for observations).
	Caller    string          `json:"caller,omitempty"`
	By        string          `json:"by,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// Kinds of events published today.
const (
	PlanCreated  = "plan.created"
	PlanUpdated  = "plan.updated"
	PlanDeleted  = "plan.deleted"
	RouteCreated = "route.created"
	RouteDeleted = "route.deleted"
	RouteRestore = "route.restored"

	// netcfg's links and addresses: the data is the VLAN or address.
	VLANCreated  = "vlan.created"
	VLANDeleted  = "vlan.deleted"
	VLANDisabled = "vlan.disabled"
	VLANEnabled  = "vlan.enabled"
	LinkRestore  = "link.restored"
	AddrAdded    = "address.added"
	AddrDeleted  = "address.deleted"

	// ConfigRestored: the system service's restore is over (its owners'
	// imports done, rolled back or not); the data is a RestoreEnd. An
	// owner that held work for the restore (api.ConfigDocuments.Restore)
	// does it now.
	ConfigRestored = "config.restored"

	// DHCP: the data is the lease (for DeviceUnknown, the address offered).
	LeaseGranted  = "lease.granted"
	LeaseRenewed  = "lease.renewed"
	LeaseReleased = "lease.released"
	LeaseDeclined = "lease.declined"
	LeaseExpired  = "lease.expired"
	// DeviceUnknown: a device with no lease asked on a served interface (at
	// most one per interface and MAC per minute).
	DeviceUnknown = "device.unknown"
)

// RestoreEnd is the data of a ConfigRestored event.
type RestoreEnd struct {
	// Restore is the id the restore's imports carried.
	Restore string `json:"restore"`
	// OK is false when the restore failed and the configuration before
	// it was brought back (or not: see the restore's answer).
	OK bool `json:"ok"`
}
