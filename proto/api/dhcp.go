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
		Summary: "Reconcile delegated-prefix routes with the leases (dry=1 only reports). Any method.",
		REST:    []REST{{AnyMethod, "/pd/sync"}}, Action: "pd-sync",
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
	// Suspended is present while serving is suspended on the interface
	// (its VLAN disabled): the subnets stay in the configuration, the
	// interface is out of the listen list (ours; the spec does not show it).
	Suspended *ServingSuspension `json:"suspended,omitempty"`
}

// ServingSuspension says since when and why an interface is not served.
type ServingSuspension struct {
	Since  string `json:"since" example:"2026-11-24 10:00:00"`
	Reason string `json:"reason,omitempty"`
}

// ServingSet suspends (enabled false) or resumes (true) DHCPv4, DHCPv6 and
// router advertisements on one interface: netcfg's VLAN disable and enable
// (Document 2's VLAN state table). The subnets, pools, delegation slice
// and resolvers stay configured either way.
type ServingSet struct {
	Iface   string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
	Enabled bool   `json:"enabled" doc:"false suspends, true resumes"`
	Reason  string `json:"reason" api:"maxlen=200" doc:"kept with a suspension"`
}

// ServingAnswer says what a suspension took offline or a resumption
// restored: "DHCPv4", "DHCPv6", "router advertisements"; empty when the
// interface serves nothing or already was in that state.
type ServingAnswer struct {
	Result
	Iface       string             `json:"iface"`
	Enabled     bool               `json:"enabled"`
	TookOffline []string           `json:"took_offline"`
	Restored    []string           `json:"restored"`
	Suspended   *ServingSuspension `json:"suspended,omitempty" doc:"the suspension in force (suspend) or lifted (resume)"`
}

// EventOf publishes serving.changed when something was taken offline or
// restored, nothing otherwise.
func (a *ServingAnswer) EventOf() (string, any) {
	if len(a.TookOffline) == 0 && len(a.Restored) == 0 {
		return "", nil
	}
	return DHCPServingChanged, a
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
		Event: DHCPNetAdded,
	})
	// NetDelete is DELETE /net.
	NetDelete = Define[NetIface, NetAnswer](Meta{
		Service: "dhcp", Name: "net.delete",
		Summary: "Stop serving the interface's IPv4 subnet; leases stay until they expire. 409 while clients are registered in it; 404 when the interface is not served and has no IPv4 address; 500 when it has one but no subnet block.",
		REST:    []REST{{"DELETE", "/net"}}, Action: "remove-net",
		Event: DHCPNetRemoved,
	})
	// DHCPReload is POST /dhcp/reload.
	DHCPReload = Define[None, ReloadAnswer](Meta{
		Service: "dhcp", Name: "reload",
		Summary: "Read the stored configuration and reservations again and apply them; 500 with `detail` when the engine refuses them (the configuration in force stays).",
		REST:    []REST{{"POST", "/dhcp/reload"}}, Action: "reload",
		Event: DHCPReloaded,
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
		Event:   DHCPReservationPut,
	})
	// ReservationPutService adds or changes a fibre service's binding.
	ReservationPutService = Define[ServiceReservation, ReservationAnswer](Meta{
		Service: "dhcp", Name: "reservations.services.put",
		Summary: "Add (201) or change (200) a fibre service's option 82 binding to a fixed IPv4 address; 400 outside served networks; 409 address or port and ONT in use.",
		Status:  201,
		Event:   DHCPReservationPut,
	})
	// ReservationDelete removes a client's or a service's reservation.
	ReservationDelete = Define[ReservationRef, ReservationAnswer](Meta{
		Service: "dhcp", Name: "reservations.delete",
		Summary: "Remove a client's (mac) or a service's (id) reservation; 404 when none.",
		Event:   DHCPReservationDeleted,
	})
	// ServingSetOp suspends or resumes serving on one interface.
	ServingSetOp = Define[ServingSet, ServingAnswer](Meta{
		Service: "dhcp", Name: "serving.set",
		Summary: "Suspend (enabled false) or resume DHCPv4, DHCPv6 and router advertisements on one interface, stored with the served networks (a last advertisement with router lifetime 0 goes out); netcfg's VLAN disable and enable call it. An interface that serves nothing answers empty lists.",
		Event:   DHCPServingChanged,
	})
	// ReservationsList pages the reservations.
	ReservationsList = Define[ReservationFilter, ReservationList](Meta{
		Service: "dhcp", Name: "reservations.list",
		Summary: "Stored reservations of one kind, sorted, paged by limit and after.", Read: true,
	})
)

// DHCPv6 and router advertisements (POST/DELETE /net6, /net6/pool,
// /net6/lease, the net6-dns action).

// RAStatus is the router-advertisement side of a DHCPv6 change.
type RAStatus struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// Net6Block is an IPv6 served network.
type Net6Block struct {
	Iface   string `json:"iface"`
	Gateway string `json:"gateway"`
	Prefix  int    `json:"prefix" doc:"prefix length"`
	Network string `json:"network"`
}

// Pool6 is a DHCPv6 address range.
type Pool6 struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// Net6Iface names an interface (POST and DELETE /net6).
type Net6Iface struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
}

// Net6Answer answers POST /net6.
type Net6Answer struct {
	Result
	Network6 Net6Block `json:"network6"`
	RADVD    RAStatus  `json:"radvd"`
	Pool     *Pool6    `json:"pool,omitempty"`
	Warning  string    `json:"warning,omitempty"`
	DNS      []string  `json:"dns" doc:"the resolvers the subnet hands out; null when none (see note)"`
	Note     string    `json:"note,omitempty"`
}

// PDRange is an interface's slice of the delegation pool.
type PDRange struct {
	Network6 string `json:"network6,omitempty"`
	Index    int    `json:"index" doc:"first prefix of the slice, as an index in the pool"`
	Slice    int    `json:"slice" doc:"slice number at this size (index / size)"`
	Start    string `json:"start" doc:"first delegated prefix"`
	End      string `json:"end" doc:"last delegated prefix"`
	Len      int    `json:"len" doc:"delegated prefix length"`
	Size     int    `json:"size" doc:"prefixes in the slice"`
}

// Net6DeleteAnswer answers DELETE /net6.
type Net6DeleteAnswer struct {
	Result
	RADVD         RAStatus `json:"radvd"`
	RemovedPDPool *PDRange `json:"removed_pd_pool"`
}

// Net6PoolSet is POST /net6/pool.
type Net6PoolSet struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
	Start string `json:"start" api:"format=ipv6" doc:"inside the network; without start and end the range is derived"`
	End   string `json:"end" api:"format=ipv6"`
}

// Net6PoolAnswer answers POST /net6/pool.
type Net6PoolAnswer struct {
	Result
	Iface    string   `json:"iface"`
	Network  string   `json:"network"`
	Pool     Pool6    `json:"pool"`
	DNSAdded []string `json:"dns_added" doc:"resolvers the subnet inherited now; null when none"`
}

// Net6LeaseSet is POST or GET /net6/lease.
type Net6LeaseSet struct {
	Valid     int `json:"valid" api:"required,min=120" doc:"valid lifetime, seconds"`
	Preferred int `json:"preferred" api:"min=0" doc:"preferred lifetime, seconds; 0 or absent is half of valid; at most valid"`
}

// Validate keeps preferred at most valid.
func (r *Net6LeaseSet) Validate() error {
	if r.Preferred > r.Valid {
		return &FieldError{Field: "preferred", Message: "preferred cannot exceed valid"}
	}
	return nil
}

// Net6LeaseAnswer answers POST /net6/lease.
type Net6LeaseAnswer struct {
	Result
	Changed []string `json:"changed"`
	RADVD   RAStatus `json:"radvd"`
	Note    string   `json:"note"`
}

// Net6DNSSet is the net6-dns action: the global DHCPv6 resolvers.
type Net6DNSSet struct {
	Servers     []string `json:"servers" api:"required" doc:"IPv6 resolvers, a list or comma-separated"`
	Domain      string   `json:"domain" api:"maxlen=253"`
	ClearDomain bool     `json:"clear_domain"`
}

// DNSStatus is the global resolvers and domain.
type DNSStatus struct {
	IPv4   []string `json:"ipv4"`
	IPv6   []string `json:"ipv6"`
	Domain string   `json:"domain"`
}

// Net6DNSAnswer answers net6-dns.
type Net6DNSAnswer struct {
	Result
	Status DNSStatus `json:"status"`
}

// Prefix delegation (GET/POST/DELETE /pd, /pd/resize, /pd/assign).

// PDCapacity is the delegation pool's capacity.
type PDCapacity struct {
	PrefixesTotal           uint64 `json:"prefixes_total"`
	PrefixesReserved        uint64 `json:"prefixes_reserved"`
	PrefixesUsed            uint64 `json:"prefixes_used" doc:"in slices"`
	PrefixesFree            uint64 `json:"prefixes_free"`
	LargestFreeRun          uint64 `json:"largest_free_run"`
	VLANsAtDefaultSlice     int    `json:"vlans_at_default_slice"`
	VLANsFreeAtDefaultSlice uint64 `json:"vlans_free_at_default_slice" doc:"how many more default-size slices fit"`
}

// PinnedPrefix is a prefix pinned to one client.
type PinnedPrefix struct {
	MAC      string `json:"mac"`
	Hostname string `json:"hostname"`
	Prefix6  string `json:"prefix6"`
}

// PDState answers GET /pd.
type PDState struct {
	Pool              string             `json:"pool"`
	PrefixLen         int                `json:"prefix_len"`
	Usable            uint64             `json:"usable"`
	ReservedForPinned int                `json:"reserved_for_pinned"`
	DefaultSlice      int                `json:"default_slice"`
	Capacity          PDCapacity         `json:"capacity"`
	PerVLAN           map[string]PDRange `json:"per_vlan"`
	Pinned            []PinnedPrefix     `json:"pinned"`
	LiveRoutes        []string           `json:"live_routes"`
	LiveCount         int                `json:"live_count"`
}

// PDSet is POST /pd and /pd/resize.
type PDSet struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
	Size  int    `json:"size" api:"min=0" doc:"prefixes, a power of two; 0 or absent is the configured slice (pd_slice)"`
}

// PDAnswer answers POST /pd and /pd/resize.
type PDAnswer struct {
	Result
	Iface     string     `json:"iface"`
	Network   string     `json:"network"`
	Pool      PDRange    `json:"pool"`
	PrefixLen int        `json:"prefix_len"`
	Capacity  PDCapacity `json:"capacity"`
	Next      *int       `json:"next" doc:"index where the next default-size slice would go; null when none fits"`
	Replaced  *PDRange   `json:"replaced,omitempty"`
	Warning   string     `json:"warning,omitempty"`
}

// PDIface names an interface (DELETE /pd).
type PDIface struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
}

// PDDeleteAnswer answers DELETE /pd.
type PDDeleteAnswer struct {
	Result
	Note string `json:"note"`
}

// PDAssign is POST or GET /pd/assign.
type PDAssign struct {
	MAC    string `json:"mac" api:"required,format=mac"`
	Prefix string `json:"prefix" doc:"an IPv6 prefix of the delegated length inside the pool's reserved band; the length may be omitted; default the first free one"`
}

// PDAssignAnswer answers /pd/assign.
type PDAssignAnswer struct {
	Result
	MAC     string `json:"mac,omitempty"`
	Prefix6 string `json:"prefix6,omitempty"`
}

// PDUnassign is DELETE /pd/assign.
type PDUnassign struct {
	MAC string `json:"mac" api:"required,format=mac"`
}

// DNS (GET/POST/DELETE /dns, /dns/{iface}).

// DNSPerVLAN is the overrides by served network.
type DNSPerVLAN struct {
	IPv4 map[string][]string `json:"ipv4"`
	IPv6 map[string][]string `json:"ipv6"`
}

// DNSEffective is what one served interface hands out.
type DNSEffective struct {
	Iface      string   `json:"iface"`
	Enabled    bool     `json:"enabled"`
	IPv4       []string `json:"ipv4"`
	IPv4Source string   `json:"ipv4_source" doc:"per-vlan, global or none"`
	IPv6       []string `json:"ipv6"`
	IPv6Source string   `json:"ipv6_source"`
}

// DNSState answers GET /dns.
type DNSState struct {
	Global            DNSStatus      `json:"global"`
	PerVLAN           DNSPerVLAN     `json:"per_vlan"`
	Effective         []DNSEffective `json:"effective"`
	ServingNoResolver []string       `json:"serving_no_resolver"`
}

// DNSSet is POST /dns (and /dns/{iface} with iface from the path).
type DNSSet struct {
	V4     []string `json:"v4" doc:"IPv4 resolvers, a list or comma-separated"`
	V6     []string `json:"v6"`
	Domain string   `json:"domain" api:"maxlen=253"`
	Apply  string   `json:"apply" api:"enum=all" doc:"all: drop per-VLAN overrides"`
	Iface  string   `json:"iface" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -" doc:"set a per-VLAN override instead"`
}

// DNSSetAnswer answers POST /dns.
type DNSSetAnswer struct {
	Result
	Changed   []string   `json:"changed,omitempty"`
	Note      string     `json:"note,omitempty"`
	Status    *DNSStatus `json:"status,omitempty"`
	AppliedTo []string   `json:"applied_to,omitempty"`
	Warning   string     `json:"warning,omitempty"`
	Shadowing []string   `json:"shadowing,omitempty"`
	Iface     string     `json:"iface,omitempty"`
	Override  *DNSStatus `json:"override,omitempty"`
}

// DNSIface is DELETE /dns/{iface}.
type DNSIface struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
}

// DNSIfaceDeleteAnswer answers DELETE /dns/{iface}.
type DNSIfaceDeleteAnswer struct {
	Result
	Removed     DNSStatus `json:"removed"`
	NowInherits DNSStatus `json:"now_inherits"`
}

// DNSClear is DELETE /dns.
type DNSClear struct {
	Global string `json:"global" api:"enum=v4|v6|domain|all"`
	Iface  string `json:"iface" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
}

// Validate asks for global or iface.
func (r *DNSClear) Validate() error {
	if (r.Global == "") == (r.Iface == "") {
		return &FieldError{Field: "global", Message: "give global (v4, v6, domain or all) or iface"}
	}
	return nil
}

// DNSClearAnswer answers DELETE /dns.
type DNSClearAnswer struct {
	Result
	Cleared           []string  `json:"cleared"`
	GlobalNow         DNSStatus `json:"global_now"`
	ServingNoResolver []string  `json:"serving_no_resolver"`
}

// Option 82 (Document 1, protection).

// Option82State answers GET /option82.
type Option82State struct {
	Count          int      `json:"count" doc:"fibre services bound by option 82"`
	FromLeases     int      `json:"from_leases" doc:"leases carrying option 82"`
	CaptureEnabled bool     `json:"capture_enabled"`
	RecentLog      []string `json:"recent_log" doc:"up to 50 lines, newest first"`
}

// Option82Set is POST /option82.
type Option82Set struct {
	Enable *bool `json:"enable" api:"required"`
}

// Option82Answer answers POST /option82.
type Option82Answer struct {
	Result
}

var (
	// Net6Add is POST /net6.
	Net6Add = Define[Net6Iface, Net6Answer](Meta{
		Service: "dhcp", Name: "net6.create",
		Summary: "Serve the interface's global IPv6 network by DHCPv6 (pool derived: ::1000-::ffff for a /64) and router advertisements (201); inherits other subnets' resolvers when no global IPv6 resolver is set. 404 without a global IPv6 address; 500 ending 'rolled back' when refused.",
		REST:    []REST{{"POST", "/net6"}}, Action: "net6-add", Status: 201,
		Event: DHCPNet6Added,
	})
	// Net6Delete is DELETE /net6.
	Net6Delete = Define[Net6Iface, Net6DeleteAnswer](Meta{
		Service: "dhcp", Name: "net6.delete",
		Summary: "Stop serving the interface by DHCPv6 and router advertisements; its delegation slice is released (removed_pd_pool). 404 when not served.",
		REST:    []REST{{"DELETE", "/net6"}}, Action: "net6-del",
		Event: DHCPNet6Removed,
	})
	// Net6Pool is POST /net6/pool.
	Net6Pool = Define[Net6PoolSet, Net6PoolAnswer](Meta{
		Service: "dhcp", Name: "net6.pool",
		Summary: "Set (or derive again, without start and end) the DHCPv6 address range of a served IPv6 network. 400 outside the network; 404 no IPv6 address or not served.",
		REST:    []REST{{"POST", "/net6/pool"}}, Action: "net6-pool",
		Event: DHCPNet6Changed,
	})
	// Net6Lease is POST or GET /net6/lease.
	Net6Lease = Define[Net6LeaseSet, Net6LeaseAnswer](Meta{
		Service: "dhcp", Name: "net6.lease",
		Summary: "DHCPv6 valid (>= 120 s) and preferred (default half, at most valid) lifetimes for addresses and delegated prefixes; existing leases keep theirs until renewal.",
		REST:    []REST{{"POST", "/net6/lease"}, {"GET", "/net6/lease"}}, Action: "net6-lease",
		Event: DHCPNet6Changed,
	})
	// Net6DNS is the net6-dns action.
	Net6DNS = Define[Net6DNSSet, Net6DNSAnswer](Meta{
		Service: "dhcp", Name: "net6.dns",
		Summary: "Set the global DHCPv6 resolvers (servers), and the domain (or clear_domain=1).",
		Action:  "net6-dns",
		Event:   DHCPDNSChanged,
	})

	// PDGet is GET /pd.
	PDGet = Define[None, PDState](Meta{
		Service: "dhcp", Name: "pd.get",
		Summary: "The delegation pool, its capacity, the per-interface slices, pinned prefixes and the live delegated routes.",
		REST:    []REST{{"GET", "/pd"}}, Action: "pd-list", Read: true,
	})
	// PDAdd is POST /pd.
	PDAdd = Define[PDSet, PDAnswer](Meta{
		Service: "dhcp", Name: "pd.create",
		Summary: "Give a served IPv6 interface a slice of the delegation pool (size a power of two, default pd_slice), aligned to its size; calling again with another size re-allocates (replaced, warning). 400 size; 404 not served by DHCPv6 or no pool; 507 pool exhausted.",
		REST:    []REST{{"POST", "/pd"}}, Action: "pd-add", Status: 201,
		Event: DHCPPDChanged,
	})
	// PDResize is POST /pd/resize.
	PDResize = Define[PDSet, PDAnswer](Meta{
		Service: "dhcp", Name: "pd.resize",
		Summary: "Re-allocate an interface's slice at another size. 400 without size; 404 no delegation on the interface; 409 already that size; 507 no room.",
		REST:    []REST{{"POST", "/pd/resize"}}, Action: "pd-resize",
		Event: DHCPPDChanged,
	})
	// PDDelete is DELETE /pd.
	PDDelete = Define[PDIface, PDDeleteAnswer](Meta{
		Service: "dhcp", Name: "pd.delete",
		Summary: "Release an interface's slice; delegated routes are withdrawn as their leases expire. 404 when it has none.",
		REST:    []REST{{"DELETE", "/pd"}}, Action: "pd-del",
		Event: DHCPPDChanged,
	})
	// PDAssignOp is POST or GET /pd/assign.
	PDAssignOp = Define[PDAssign, PDAssignAnswer](Meta{
		Service: "dhcp", Name: "pd.assign",
		Summary: "Pin a prefix of the reserved band to a registered client (by mac). 404 unknown client; 400 invalid or outside the reserved band; 409 pinned to another client; 507 band full.",
		REST:    []REST{{"POST", "/pd/assign"}, {"GET", "/pd/assign"}}, Action: "pd-assign",
		Event: DHCPPDAssigned,
	})
	// PDUnassignOp is DELETE /pd/assign.
	PDUnassignOp = Define[PDUnassign, PDAssignAnswer](Meta{
		Service: "dhcp", Name: "pd.unassign",
		Summary: "Unpin a client's prefix. 404 when it has none.",
		REST:    []REST{{"DELETE", "/pd/assign"}}, Action: "pd-unassign",
		Event: DHCPPDUnassigned,
	})

	// DNSGet is GET /dns.
	DNSGet = Define[None, DNSState](Meta{
		Service: "dhcp", Name: "dns.get",
		Summary: "Global resolvers and domain, per-VLAN overrides by network, what each served interface hands out, and served interfaces without a resolver.",
		REST:    []REST{{"GET", "/dns"}}, Action: "dns-list", Read: true,
	})
	// DNSSetOp is POST /dns and POST /dns/{iface}.
	DNSSetOp = Define[DNSSet, DNSSetAnswer](Meta{
		Service: "dhcp", Name: "dns.set",
		Summary: "Set the global resolvers and domain (apply=all drops per-VLAN overrides), or with iface a per-VLAN override. Clients pick changes up at renewal. 400 nothing given or an invalid address; 404 interface not served.",
		REST:    []REST{{"POST", "/dns"}, {"POST", "/dns/{iface}"}}, Action: "dns-set",
		Event: DHCPDNSChanged,
	})
	// DNSIfaceDelete is DELETE /dns/{iface}.
	DNSIfaceDelete = Define[DNSIface, DNSIfaceDeleteAnswer](Meta{
		Service: "dhcp", Name: "dns.iface.delete",
		Summary: "Drop an interface's override; it inherits the global resolvers. 404 no override.",
		REST:    []REST{{"DELETE", "/dns/{iface}"}},
		Event:   DHCPDNSChanged,
	})
	// DNSClearOp is DELETE /dns.
	DNSClearOp = Define[DNSClear, DNSClearAnswer](Meta{
		Service: "dhcp", Name: "dns.clear",
		Summary: "Clear global v4, v6, domain or all (all also removes per-VLAN IPv6 resolvers), or one interface's override. 404 nothing of that kind set.",
		REST:    []REST{{"DELETE", "/dns"}}, Action: "dns-del",
		Event: DHCPDNSChanged,
	})

	// Option82Get is GET /option82.
	Option82Get = Define[None, Option82State](Meta{
		Service: "dhcp", Name: "option82.get",
		Summary: "Option 82 use: bindings, leases carrying it, whether it is used, the latest leases with it (up to 50 lines).",
		REST:    []REST{{"GET", "/option82"}}, Action: "option82", Read: true,
	})
	// Option82SetOp is POST /option82.
	Option82SetOp = Define[Option82Set, Option82Answer](Meta{
		Service: "dhcp", Name: "option82.set",
		Summary: "Turn option 82 lookup and recording on or off; a configuration the DHCP server refuses is reverted: 400 with detail.",
		REST:    []REST{{"POST", "/option82"}},
		Event:   DHCPOption82Changed,
	})
)

// Events of the dhcp service's configuration (router.events.dhcp.<kind>),
// published after the change is stored and in force; the data is the
// operation's answer. Lease events (lease.*) are the engine's own.
const (
	DHCPNetAdded           = "net.added"
	DHCPNetRemoved         = "net.removed"
	DHCPNet6Added          = "net6.added"
	DHCPNet6Removed        = "net6.removed"
	DHCPNet6Changed        = "net6.changed"
	DHCPReloaded           = "config.reloaded"
	DHCPPDChanged          = "pd.changed"
	DHCPPDAssigned         = "pd.assigned"
	DHCPPDUnassigned       = "pd.unassigned"
	DHCPDNSChanged         = "dns.changed"
	DHCPOption82Changed    = "option82.changed"
	DHCPReservationPut     = "reservation.put"
	DHCPReservationDeleted = "reservation.deleted"
	DHCPServingChanged     = "serving.changed"
)
