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

// Served networks (Document 2, "Served network" and "Served networks,
// DHCP, DHCPv6").

// ServedNetwork is one IPv4 served network in GET /networks.
type ServedNetwork struct {
	Iface    string `json:"iface" example:"vlan100"`
	Gateway  string `json:"gateway" example:"10.0.0.1"`
	Subnet   string `json:"subnet" doc:"network address" example:"10.0.0.0"`
	Mask     string `json:"mask" example:"255.255.255.0"`
	CIDR     int    `json:"cidr" example:"24"`
	Network  string `json:"network" example:"10.0.0.0/24"`
	Bcast    string `json:"bcast" example:"10.0.0.255"`
	IPv6     string `json:"ipv6,omitempty" doc:"the IPv6 network served on the same interface, when there is one"`
	Gateway6 string `json:"gateway6,omitempty"`
	Label    string `json:"label,omitempty"`
}

// NetworkList answers GET /networks.
type NetworkList struct {
	Count    int             `json:"count"`
	Networks []ServedNetwork `json:"networks"`
}

// DHCPInterface is one interface with an address in GET /interfaces.
type DHCPInterface struct {
	Iface        string `json:"iface"`
	Gateway      string `json:"gateway,omitempty" doc:"the interface's IPv4 address"`
	Network      string `json:"network,omitempty"`
	CIDR         int    `json:"cidr,omitempty"`
	InDHCPConf   bool   `json:"in_dhcp_conf" doc:"the interface's subnet is in the DHCP configuration"`
	InDHCPListen bool   `json:"in_dhcp_listen" doc:"the interface is in the listen list"`
	DHCPActive   bool   `json:"dhcp_active" doc:"both"`
	Network6     string `json:"network6,omitempty"`
	Gateway6     string `json:"gateway6,omitempty"`
	InDHCP6Conf  bool   `json:"in_dhcp6_conf"`
	InDHCP6List  bool   `json:"in_dhcp6_listen"`
	DHCP6Active  bool   `json:"dhcp6_active"`
}

// InterfaceList answers GET /interfaces (also GET /net and GET /net6).
type InterfaceList struct {
	Count      int             `json:"count"`
	Interfaces []DHCPInterface `json:"interfaces"`
}

// NetIface names a served interface (POST and DELETE /net).
type NetIface struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
	Label string `json:"label" api:"maxlen=200" doc:"comment on the subnet block (POST only)"`
}

// NetBlock is the subnet block POST /net added.
type NetBlock struct {
	Iface   string `json:"iface"`
	Gateway string `json:"gateway,omitempty"`
	Network string `json:"network"`
	CIDR    int    `json:"cidr,omitempty"`
}

// NetAnswer answers POST and DELETE /net.
type NetAnswer struct {
	Result
	Network NetBlock `json:"network"`
	Label   *string  `json:"label,omitempty"`
}

// ReloadAnswer answers POST /dhcp/reload.
type ReloadAnswer struct {
	Result
}

// DHCPPath is the rest of a /dhcp/ path no operation has.
type DHCPPath struct {
	Path string `json:"path"`
}

// Reservations: one key per subscriber under /router/dhcp/reservations/,
// written by the subscribers service through these operations and applied
// by the engine one element at a time.

// ClientReservation is a MAC client's fixed addresses.
type ClientReservation struct {
	MAC      string `json:"mac" api:"required,format=mac"`
	IP       string `json:"ip" api:"required,format=ipv4" doc:"fixed IPv4 address, inside a served network"`
	IPv6     string `json:"ipv6" api:"format=ipv6" doc:"fixed IPv6 address (IA_NA), inside a served IPv6 network"`
	Prefix6  string `json:"prefix6" api:"format=cidr" doc:"pinned delegated prefix"`
	Hostname string `json:"hostname" api:"maxlen=63"`
}

// ServiceReservation binds a fibre service's PON port and ONT id (option 82)
// to a fixed IPv4 address.
type ServiceReservation struct {
	ID       string `json:"id" api:"required" pattern:"^[A-Za-z0-9_.-]{1,64}$" hint:"1-64 letters, digits, _ . -"`
	OLT      string `json:"olt" doc:"access-node id in the circuit-id; empty matches any OLT"`
	PON      string `json:"pon" api:"required" pattern:"^[0-9]+/[0-9]+/[0-9]+$" hint:"frame/slot/port, e.g. 0/1/0"`
	ONTID    int    `json:"ont_id" api:"min=0,max=255"`
	SN       string `json:"sn"`
	IPv4     string `json:"ipv4" api:"required,format=ipv4"`
	Hostname string `json:"hostname" api:"maxlen=63"`
}

// ReservationRef names one reservation: a client by mac or a service by id.
type ReservationRef struct {
	MAC string `json:"mac" api:"format=mac"`
	ID  string `json:"id"`
}

// Validate asks for exactly one of mac and id.
func (r *ReservationRef) Validate() error {
	if (r.MAC == "") == (r.ID == "") {
		return &FieldError{Field: "mac", Message: "give mac (a client) or id (a service)"}
	}
	return nil
}

// ReservationAnswer answers a reservation change.
type ReservationAnswer struct {
	Result
	Client  *ClientReservation  `json:"client,omitempty"`
	Service *ServiceReservation `json:"service,omitempty"`
}

// ReservationFilter pages the stored reservations.
type ReservationFilter struct {
	Kind  string `json:"kind" api:"required,enum=clients|services"`
	Limit int    `json:"limit" api:"min=1,max=1000,default=1000"`
	After string `json:"after" doc:"the previous page's next"`
}

// ReservationList is one page of reservations, sorted by key.
type ReservationList struct {
	Count    int                  `json:"count"`
	Clients  []ClientReservation  `json:"clients,omitempty"`
	Services []ServiceReservation `json:"services,omitempty"`
	Next     string               `json:"next,omitempty"`
}

var (
	// NetworksList is GET /networks.
	NetworksList = Define[None, NetworkList](Meta{
		Service: "dhcp", Name: "networks.list",
		Summary: "IPv4 served networks, each with the IPv6 network served on the same interface.",
		REST:    []REST{{"GET", "/networks"}}, Action: "networks", Read: true,
	})
	// InterfacesList is GET /interfaces (also /net, /net6).
	InterfacesList = Define[None, InterfaceList](Meta{
		Service: "dhcp", Name: "interfaces.list",
		Summary: "Interfaces with an address in the router namespace, and whether each is in the DHCP/DHCPv6 configuration and listen list.",
		REST:    []REST{{"GET", "/interfaces"}, {"GET", "/net"}, {"GET", "/net6"}}, Action: "interfaces", Read: true,
	})
	// NetAdd is POST /net.
	NetAdd = Define[NetIface, NetAnswer](Meta{
		Service: "dhcp", Name: "net.create",
		Summary: "Serve the interface's live IPv4 subnet (201); calling again updates the label. 404 when the interface has no IPv4 address; 500 with `detail`, message ending 'rolled back', when the engine refuses the configuration.",
		REST:    []REST{{"POST", "/net"}}, Action: "add-net", Status: 201,
	})
	// NetDelete is DELETE /net.
	NetDelete = Define[NetIface, NetAnswer](Meta{
		Service: "dhcp", Name: "net.delete",
		Summary: "Stop serving the interface's IPv4 subnet; leases stay until they expire. 409 while clients are registered in it; 404 when the interface is not served and has no IPv4 address; 500 when it has one but no subnet block.",
		REST:    []REST{{"DELETE", "/net"}}, Action: "remove-net",
	})
	// DHCPReload is POST /dhcp/reload.
	DHCPReload = Define[None, ReloadAnswer](Meta{
		Service: "dhcp", Name: "reload",
		Summary: "Read the stored configuration and reservations again and apply them; 500 with `detail` when the engine refuses them (the configuration in force stays).",
		REST:    []REST{{"POST", "/dhcp/reload"}}, Action: "reload",
	})

	// DHCPUnknown is any other /dhcp/ path: 404.
	DHCPUnknown = Define[DHCPPath, None](Meta{
		Service: "dhcp", Name: "unknown",
		Summary: "Any other /dhcp/ path: 404.",
		REST:    []REST{{AnyMethod, "/dhcp/{path}"}}, Read: true,
	})

	// ReservationPutClient adds or changes a MAC client's reservation.
	ReservationPutClient = Define[ClientReservation, ReservationAnswer](Meta{
		Service: "dhcp", Name: "reservations.clients.put",
		Summary: "Add (201) or change (200) a MAC client's fixed addresses; 400 outside served networks; 409 address in use by another reservation. Served at the client's next request.",
		Status:  201,
	})
	// ReservationPutService adds or changes a fibre service's binding.
	ReservationPutService = Define[ServiceReservation, ReservationAnswer](Meta{
		Service: "dhcp", Name: "reservations.services.put",
		Summary: "Add (201) or change (200) a fibre service's option 82 binding to a fixed IPv4 address; 400 outside served networks; 409 address or port and ONT in use.",
		Status:  201,
	})
	// ReservationDelete removes a client's or a service's reservation.
	ReservationDelete = Define[ReservationRef, ReservationAnswer](Meta{
		Service: "dhcp", Name: "reservations.delete",
		Summary: "Remove a client's (mac) or a service's (id) reservation; 404 when none.",
	})
	// ReservationsList pages the reservations.
	ReservationsList = Define[ReservationFilter, ReservationList](Meta{
		Service: "dhcp", Name: "reservations.list",
		Summary: "Stored reservations of one kind, sorted, paged by limit and after.", Read: true,
	})
)
