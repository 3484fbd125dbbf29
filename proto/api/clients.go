package api

import "time"

// MAC clients (Document 2, "Client (legacy, MAC-based)"): the record and
// the operations other services call to follow them. The subscribers
// service owns clients; the firewall (suspension blocks, anti-spoofing
// bindings), the shaper and cgnat (slots) follow them through the client.*
// events and page through ClientsPage at start.

// Client is a MAC client as stored and answered.
type Client struct {
	MAC           string  `json:"mac" example:"AA:BB:CC:DD:EE:FF"`
	IP            string  `json:"ip" example:"10.0.0.50"`
	IPv6          *string `json:"ipv6"`
	Plan          *string `json:"plan"`
	Suspended     bool    `json:"suspended"`
	AutoSuspended bool    `json:"auto_suspended" doc:"set by end-date reconciliation; a manual suspend clears it"`
	Expires       *string `json:"expires" doc:"end date, YYYY-MM-DD, or null for never"`
	Hostname      string  `json:"hostname"`
	Network       *string `json:"network"`
	Network6      *string `json:"network6"`
	Iface         string  `json:"iface"`
	Gateway       string  `json:"gateway"`
	Comment       string  `json:"comment"`
	Created       string  `json:"created" example:"2026-11-24 10:00:00"`
}

// ClientPageRequest pages every client in MAC order.
type ClientPageRequest struct {
	After string `json:"after" doc:"the previous page's next"`
	Limit int    `json:"limit,omitempty" api:"min=1,max=10000,default=5000" doc:"0 from a typed caller is the default"`
	Iface string `json:"iface" doc:"only clients on this interface"`
}

// ClientPage is one page of clients.
type ClientPage struct {
	Count   int      `json:"count"`
	Clients []Client `json:"clients"`
	Next    string   `json:"next,omitempty" doc:"empty on the last page"`
}

// Client events: the data is the Client after the change (before it, for
// deleted).
const (
	ClientAdded     = "client.added"
	ClientChanged   = "client.changed"
	ClientDeleted   = "client.deleted"
	ClientSuspended = "client.suspended"
	ClientResumed   = "client.resumed"
	ClientReshaped  = "client.reshaped"
)

// ClientsPage gives other services every client, page by page (firewall
// bindings, cgnat slots, the refusals of netcfg).
var ClientsPage = Define[ClientPageRequest, ClientPage](Meta{
	Service: "subscribers", Name: "clients.page",
	Summary: "Clients in MAC order, a page at a time, optionally of one interface. Only services call it.", Read: true,
})

// The HTTP operations on MAC clients (Document 2, "Clients"; Document 1's
// action rows list, search, get, add, delete, active, connected,
// clients6, ip-info, set-plan, set-expires, suspend, resume).

// ClientAdd is POST /clients.
type ClientAdd struct {
	MAC      string `json:"mac" api:"required,format=mac" doc:"any common form; stored upper-case with colons"`
	IP       string `json:"ip" api:"required,format=ipv4" doc:"fixed IPv4 address inside a network on a router interface, not its network, gateway or broadcast address"`
	IPv6     string `json:"ipv6" api:"format=ipv6" doc:"fixed IPv6 address on the same interface"`
	Hostname string `json:"hostname" api:"maxlen=63" pattern:"^[A-Za-z0-9.-]+$" hint:"letters, digits, dots and hyphens, at most 63" doc:"default client-<mac without colons>"`
	Comment  string `json:"comment" api:"maxlen=200" doc:"the limit is ours: the spec sets none"`
	Plan     string `json:"plan" doc:"an existing plan's name, or none"`
	Expires  string `json:"expires" doc:"end date: YYYY-MM-DD (the end of that day), YYYY-MM-DD HH:MM (router's local time), or never"`
}

// Validate checks the end date's form.
func (c *ClientAdd) Validate() error { return validExpires(c.Expires) }

// ExpiresLayouts are the accepted forms of an end date.
var ExpiresLayouts = []string{"2006-01-02", "2006-01-02 15:04"}

func validExpires(s string) error {
	if s == "" || s == "never" {
		return nil
	}
	for _, l := range ExpiresLayouts {
		if _, err := time.Parse(l, s); err == nil {
			return nil
		}
	}
	return &FieldError{Field: "expires", Message: "unreadable date " + quoteShort(s) + ": want YYYY-MM-DD, YYYY-MM-DD HH:MM or never"}
}

// ClientAddAnswer answers POST /clients.
type ClientAddAnswer struct {
	Result
	Client Client `json:"client"`
}

// EventOf publishes client.added with the client.
func (a *ClientAddAnswer) EventOf() (string, any) { return ClientAdded, a.Client }

// ClientQuery is GET /clients.
type ClientQuery struct {
	Network string `json:"network" api:"format=cidr" doc:"only clients whose IPv4 address is in this network"`
	Q       string `json:"q" api:"maxlen=200" doc:"case-insensitive search in MAC, IP, IPv6, hostname, comment, interface and network"`
}

// ClientListed is a client in GET /clients: the record and what the
// neighbour table and the delegated-prefix leases say of it.
type ClientListed struct {
	Client
	IPv6Actual       []string `json:"ipv6_actual" doc:"global IPv6 addresses the client's MAC answers for"`
	IPv6All          []string `json:"ipv6_all" doc:"every IPv6 address of its MAC in the neighbour table, link-local too"`
	IPv6State        string   `json:"ipv6_state" doc:"neighbour state of its IPv6 address (the reserved one, else the first seen); empty when none"`
	Prefix6Delegated []string `json:"prefix6_delegated" doc:"prefixes delegated to its MAC"`
}

// ClientList answers GET /clients.
type ClientList struct {
	Count   int            `json:"count"`
	Clients []ClientListed `json:"clients"`
}

// ClientLookup is GET /clients/{mac}.
type ClientLookup struct {
	MAC string `json:"mac" api:"required" doc:"MAC (any form), IPv4, IPv6 or hostname, case-insensitive"`
}

// ClientAnswer is one client.
type ClientAnswer struct {
	Client Client `json:"client"`
}

// ClientRef names one client by MAC (DELETE /clients/{mac}, POST /suspend,
// POST /resume).
type ClientRef struct {
	MAC string `json:"mac" api:"required,format=mac"`
}

// DHCPOutcome says what happened to the client's DHCP reservation.
type DHCPOutcome struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// ClientDeleteAnswer answers DELETE /clients/{mac}.
type ClientDeleteAnswer struct {
	Result
	Client Client      `json:"client"`
	DHCP   DHCPOutcome `json:"dhcp"`
}

// EventOf publishes client.deleted with the client as it was.
func (a *ClientDeleteAnswer) EventOf() (string, any) { return ClientDeleted, a.Client }

// ClientPlanSet is POST /plan.
type ClientPlanSet struct {
	MAC  string `json:"mac" api:"required,format=mac"`
	Plan string `json:"plan" doc:"an existing plan, or empty or none to remove the limit"`
}

// ClientPlanAnswer answers POST /plan.
type ClientPlanAnswer struct {
	Result
	MAC    string  `json:"mac"`
	Plan   *string `json:"plan"`
	Client Client  `json:"-"`
}

// EventOf publishes client.reshaped with the client.
func (a *ClientPlanAnswer) EventOf() (string, any) { return ClientReshaped, a.Client }

// ClientSuspendAnswer answers POST /suspend and POST /resume.
type ClientSuspendAnswer struct {
	Result
	MAC       string `json:"mac"`
	Suspended bool   `json:"suspended"`
	Client    Client `json:"-"`
}

// EventOf publishes client.suspended or client.resumed with the client.
func (a *ClientSuspendAnswer) EventOf() (string, any) {
	if a.Suspended {
		return ClientSuspended, a.Client
	}
	return ClientResumed, a.Client
}

// ClientExpiresSet is POST /expires.
type ClientExpiresSet struct {
	MAC     string `json:"mac" api:"required,format=mac"`
	Expires string `json:"expires" doc:"YYYY-MM-DD, YYYY-MM-DD HH:MM, or empty or never to clear"`
}

// Validate checks the end date's form.
func (c *ClientExpiresSet) Validate() error { return validExpires(c.Expires) }

// ClientExpiresAnswer answers POST /expires, after every client's end date
// was reconciled.
type ClientExpiresAnswer struct {
	Result
	MAC       string  `json:"mac"`
	Expires   *string `json:"expires"`
	Suspended bool    `json:"suspended"`
	Client    Client  `json:"-"`
}

// EventOf publishes client.changed with the client.
func (a *ClientExpiresAnswer) EventOf() (string, any) { return ClientChanged, a.Client }

// ActiveQuery is GET /clients/active.
type ActiveQuery struct {
	State string `json:"state" api:"enum=online|recent|offline" doc:"only entries in this state; the summary still counts everything"`
}

// ActiveEntry is one client in GET /clients/active.
type ActiveEntry struct {
	MAC              string   `json:"mac"`
	IP               string   `json:"ip"`
	Hostname         string   `json:"hostname"`
	Iface            string   `json:"iface"`
	Status           string   `json:"status" doc:"online (REACHABLE, DELAY, PROBE, PERMANENT), recent (STALE) or offline"`
	NeighState       string   `json:"neigh_state" doc:"the neighbour entry's state, empty when none"`
	SeenMAC          string   `json:"seen_mac" doc:"the MAC answering for the address, empty when none"`
	MACMismatch      bool     `json:"mac_mismatch"`
	IPv6Actual       []string `json:"ipv6_actual" doc:"global IPv6 addresses the client's MAC answers for"`
	IPv6All          []string `json:"ipv6_all" doc:"every IPv6 address, link-local too"`
	Prefix6Delegated []string `json:"prefix6_delegated"`
}

// ActiveSummary counts every registered client and dynamic lease.
type ActiveSummary struct {
	Registered          int `json:"registered"`
	Services            int `json:"services"`
	Online              int `json:"online"`
	Recent              int `json:"recent"`
	Offline             int `json:"offline"`
	DynamicActiveLeases int `json:"dynamic_active_leases"`
}

// DynamicLease is a DHCP lease belonging to no client.
type DynamicLease struct {
	IP         string `json:"ip"`
	State      string `json:"state"`
	MAC        string `json:"mac"`
	Hostname   string `json:"hostname"`
	Ends       string `json:"ends"`
	NeighState string `json:"neigh_state"`
	Online     bool   `json:"online"`
}

// ActiveAnswer answers GET /clients/active.
type ActiveAnswer struct {
	Count         int            `json:"count"`
	Clients       []ActiveEntry  `json:"clients"`
	Summary       ActiveSummary  `json:"summary"`
	DynamicLeases []DynamicLease `json:"dynamic_leases"`
}

// Clients6Query is GET /clients6.
type Clients6Query struct {
	Iface   string `json:"iface" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name" doc:"only this interface"`
	Routers bool   `json:"routers" doc:"include neighbouring routers (left out otherwise unless registered or holding a lease)"`
}

// Client6Entry is one IPv6 neighbour's MAC in GET /clients6.
type Client6Entry struct {
	MAC              string   `json:"mac"`
	Registered       bool     `json:"registered"`
	Hostname         string   `json:"hostname"`
	IPv4             string   `json:"ipv4"`
	Iface            string   `json:"iface"`
	IPv6             string   `json:"ipv6" doc:"the first global address seen"`
	IPv6All          []string `json:"ipv6_all"`
	IPv6Reserved     *string  `json:"ipv6_reserved"`
	LinkLocal        string   `json:"link_local"`
	State            string   `json:"state"`
	Online           bool     `json:"online"`
	Router           bool     `json:"router"`
	Lease6           *string  `json:"lease6"`
	Prefix6Pinned    *string  `json:"prefix6_pinned"`
	Prefix6Delegated []string `json:"prefix6_delegated"`
}

// Clients6Summary counts the entries.
type Clients6Summary struct {
	Total      int `json:"total"`
	Online     int `json:"online"`
	Registered int `json:"registered"`
	WithPrefix int `json:"with_prefix"`
}

// Clients6Answer answers GET /clients6.
type Clients6Answer struct {
	Count                   int             `json:"count"`
	Clients                 []Client6Entry  `json:"clients"`
	Summary                 Clients6Summary `json:"summary"`
	OrphanDelegatedPrefixes []string        `json:"orphan_delegated_prefixes" doc:"delegated prefixes whose MAC is no neighbour now"`
}

// IPsQuery is GET /ips.
type IPsQuery struct {
	Network string `json:"network" api:"format=cidr" doc:"one network on the router; omit for all"`
}

// IPUsed is an address held by a client.
type IPUsed struct {
	IP       string `json:"ip"`
	MAC      string `json:"mac"`
	Hostname string `json:"hostname"`
}

// IPSeen is an address answered on the network by no client.
type IPSeen struct {
	IP         string `json:"ip"`
	MAC        string `json:"mac"`
	NeighState string `json:"neigh_state"`
}

// IPNetwork is one network's address usage.
type IPNetwork struct {
	Network          string   `json:"network"`
	Iface            string   `json:"iface"`
	Gateway          string   `json:"gateway"`
	TotalAssignable  int64    `json:"total_assignable"`
	UsedCount        int64    `json:"used_count"`
	FreeCount        int64    `json:"free_count"`
	NextFree         []string `json:"next_free" doc:"the first ten free addresses"`
	Used             []IPUsed `json:"used"`
	UnregisteredSeen []IPSeen `json:"unregistered_seen"`
}

// IPsAnswer answers GET /ips.
type IPsAnswer struct {
	Result
	Count    int         `json:"count"`
	Networks []IPNetwork `json:"networks"`
}

// ClientsReadTimeout bounds the reads answering every client (GET
// /clients, /clients/active), and one try of them: at 100,000 clients the
// answer takes seconds to render and travels spilled (bus: larger than one
// message), and the default 3 s try asked again beside a rendering still
// under way, or cut the spilled answer's reading short (BenchmarkClientsKernel
// at 100,000: GET /clients 500, "reading spilled body: nats: timeout").
const ClientsReadTimeout = 30 * time.Second

var (
	// ClientsList is GET /clients.
	ClientsList = Define[ClientQuery, ClientList](Meta{
		Service: "subscribers", Name: "clients.list",
		Summary: "MAC clients sorted by MAC, optionally only those in `network` and matching `q`.",
		REST:    []REST{{"GET", "/clients"}}, Action: "list", Read: true,
		Timeout: ClientsReadTimeout, Attempt: ClientsReadTimeout,
	})
	// ClientsSearch is the search action (GET /clients?q=).
	ClientsSearch = Define[ClientQuery, ClientList](Meta{
		Service: "subscribers", Name: "clients.search",
		Summary: "As GET /clients?q=.", Action: "search", Read: true,
		Timeout: ClientsReadTimeout, Attempt: ClientsReadTimeout,
	})
	// ClientsGet is GET /clients/{mac}.
	ClientsGet = Define[ClientLookup, ClientAnswer](Meta{
		Service: "subscribers", Name: "clients.get",
		Summary: "One client by MAC (any form), IPv4, IPv6 or hostname (case-insensitive); 404 when nothing matches.",
		REST:    []REST{{"GET", "/clients/{mac}"}}, Action: "get", Read: true,
	})
	// ClientsAdd is POST /clients.
	ClientsAdd = Define[ClientAdd, ClientAddAnswer](Meta{
		Service: "subscribers", Name: "clients.create",
		Summary: "Add a MAC client (201): stored with its address, hostname and plan indexes in one etcd transaction, then reserved in DHCP, shaped to its plan and blocked when its end date has passed. 400 invalid field or address outside the router's networks (or its network, gateway or broadcast address, or IPv6 not on the same interface); 404 unknown plan; 409 MAC (`existing`), IP, IPv6 or hostname in use; 500 DHCP does not take it (rolled back, `detail`); 503 the shaper or firewall does not answer (rolled back).",
		REST:    []REST{{"POST", "/clients"}}, Action: "add", Status: 201, Event: ClientAdded,
	})
	// ClientsDelete is DELETE /clients/{mac}.
	ClientsDelete = Define[ClientRef, ClientDeleteAnswer](Meta{
		Service: "subscribers", Name: "clients.delete",
		Summary: "Delete a client: its block, shaping and DHCP reservation removed, then its record. 404 not found; 400 without MAC.",
		REST:    []REST{{"DELETE", "/clients/{mac}"}, {"DELETE", "/clients"}}, Action: "delete", Event: ClientDeleted,
	})
	// ClientsSetPlan is POST /plan.
	ClientsSetPlan = Define[ClientPlanSet, ClientPlanAnswer](Meta{
		Service: "subscribers", Name: "clients.plan",
		Summary: "Put a client on a plan (reshaped at once) or remove its limit (empty or none). 404 unknown client or plan.",
		REST:    []REST{{"POST", "/plan"}}, Action: "set-plan", Event: ClientReshaped,
	})
	// ClientsSuspend is POST /suspend and /suspend/{mac}.
	ClientsSuspend = Define[ClientRef, ClientSuspendAnswer](Meta{
		Service: "subscribers", Name: "clients.suspend",
		Summary: "Suspend a client: nothing it sends is forwarded, DHCP still answers it; clears auto_suspended. 404 unknown client.",
		REST:    []REST{{"POST", "/suspend"}, {"POST", "/suspend/{mac}"}}, Action: "suspend", Event: ClientSuspended,
	})
	// ClientsResume is POST /resume and /resume/{mac}.
	ClientsResume = Define[ClientRef, ClientSuspendAnswer](Meta{
		Service: "subscribers", Name: "clients.resume",
		Summary: "Resume a suspended client at once. 404 unknown client.",
		REST:    []REST{{"POST", "/resume"}, {"POST", "/resume/{mac}"}}, Action: "resume", Event: ClientResumed,
	})
	// ClientsExpires is POST /expires.
	ClientsExpires = Define[ClientExpiresSet, ClientExpiresAnswer](Meta{
		Service: "subscribers", Name: "clients.expires",
		Summary: "Set or clear a client's end date, then reconcile every client's end date (past: suspended with auto_suspended; later or never: an auto-suspended client resumed). 400 unreadable date; 404 unknown client.",
		REST:    []REST{{"POST", "/expires"}}, Action: "set-expires", Event: ClientChanged,
	})
	// ClientsActive is GET /clients/active.
	ClientsActive = Define[ActiveQuery, ActiveAnswer](Meta{
		Service: "subscribers", Name: "clients.active",
		Summary: "Every client with its neighbour state in the router's namespace (online, recent, offline), the MAC answering for its address, a summary, and the dynamic leases of no client.",
		REST:    []REST{{"GET", "/clients/active"}}, Action: "active", Read: true,
		Timeout: ClientsReadTimeout, Attempt: ClientsReadTimeout,
	})
	// ClientsConnected is the connected action (GET /clients/active).
	ClientsConnected = Define[ActiveQuery, ActiveAnswer](Meta{
		Service: "subscribers", Name: "clients.connected",
		Summary: "As GET /clients/active.", Action: "connected", Read: true,
		Timeout: ClientsReadTimeout, Attempt: ClientsReadTimeout,
	})
	// Clients6 is GET /clients6.
	Clients6 = Define[Clients6Query, Clients6Answer](Meta{
		Service: "subscribers", Name: "clients6.list",
		Summary: "IPv6 neighbours by MAC, registered or not; routers left out unless routers=1 (or registered, or holding a lease); the router's own MACs always left out.",
		REST:    []REST{{"GET", "/clients6"}}, Action: "clients6", Read: true,
	})
	// IPsGet is GET /ips.
	IPsGet = Define[IPsQuery, IPsAnswer](Meta{
		Service: "subscribers", Name: "ips.get",
		Summary: "Address usage of each IPv4 network on the router's interfaces: assignable, used, free, the first ten free, addresses seen answered by no client. 404 network not on this router.",
		REST:    []REST{{"GET", "/ips"}}, Action: "ip-info", Read: true,
	})
)
