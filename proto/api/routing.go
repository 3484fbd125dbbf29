package api

import "encoding/json"

// The routing service (Document 1: Routing, BGP and OSPF through BIRD).

// Routing events, on router.events.routing.<kind>. A change's data is its
// BGPChange answer plus the operation; a session event's data is
// {peer, state, up}.
const (
	EventBGPChanged   = "bgp.changed"   // a change loaded (pending or not)
	EventBGPConfirmed = "bgp.confirmed" // the waiting change kept
	EventBGPUndone    = "bgp.undone"    // the waiting change undone (undo, or the timer)
	EventBGPSession   = "bgp.session"   // a peer's session went up or down
)

// BGPPeer is one peer as GET /bgp shows it: its settings (never the
// password) and its live state read from the daemon.
type BGPPeer struct {
	Name               string  `json:"name"`
	IP                 string  `json:"ip"`
	ASN                int64   `json:"asn"`
	Type               string  `json:"type" doc:"upstream or ibgp"`
	Routes             string  `json:"routes" doc:"default or full"`
	Role               string  `json:"role" doc:"primary or backup"`
	Enabled            bool    `json:"enabled"`
	Description        string  `json:"description"`
	PasswordSet        bool    `json:"password_set" doc:"the password is never returned"`
	BlackholeCommunity string  `json:"blackhole_community" doc:"as:n, or empty"`
	MaxPrefix          int64   `json:"max_prefix"`
	Multihop           int64   `json:"multihop" doc:"TTL; 0 = directly connected"`
	BFD                bool    `json:"bfd"`
	BFDState           *string `json:"bfd_state" doc:"Up, Down, Init... or null"`
	State              *string `json:"state" doc:"Established when up; Active, Connect, Idle... otherwise; null while BGP is off"`
	Up                 bool    `json:"up"`
	Since              *string `json:"since" doc:"when the session last changed state, YYYY-MM-DD HH:MM:SS"`
	Info               *string `json:"info"`
	LastError          *string `json:"last_error"`
	Received           int64   `json:"received" doc:"routes received (imported + filtered), summed over the peer's channels"`
	Sent               int64   `json:"sent"`
	Filtered           int64   `json:"filtered"`
	Best               int64   `json:"best"`
}

// OSPFIface is one OSPF interface.
type OSPFIface struct {
	Name          string `json:"name"`
	Cost          int64  `json:"cost"`
	Passive       bool   `json:"passive"`
	NeighborsFull int    `json:"neighbors_full"`
}

// OSPFNeighbor is one OSPF neighbour.
type OSPFNeighbor struct {
	Proto    string `json:"proto"`
	RouterID string `json:"router_id"`
	State    string `json:"state"`
	Iface    string `json:"iface"`
	IP       string `json:"ip"`
}

// RoutingProtocol is one protocol instance of the daemon.
type RoutingProtocol struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Info  string `json:"info"`
	Since string `json:"since"`
}

// OSPFView is the OSPF block of GET /bgp.
type OSPFView struct {
	Enabled          bool              `json:"enabled"`
	Area             string            `json:"area"`
	OriginateDefault bool              `json:"originate_default"`
	AcceptDefault    bool              `json:"accept_default"`
	Interfaces       []OSPFIface       `json:"interfaces"`
	Neighbors        []OSPFNeighbor    `json:"neighbors"`
	Protocols        []RoutingProtocol `json:"protocols"`
}

// RPKIStatus is the validated origin data's state.
type RPKIStatus struct {
	Data  *string `json:"data" doc:"the RTR cache's state, or null while RPKI is off"`
	AgeS  *int64  `json:"age_s" doc:"seconds since the data was last refreshed"`
	VRPs  int64   `json:"vrps" doc:"route origins held"`
	Stale bool    `json:"stale"`
}

// RPKIView is the rpki block of GET /bgp.
type RPKIView struct {
	Enabled bool       `json:"enabled"`
	Status  RPKIStatus `json:"status"`
}

// BGPPending is the change awaiting confirm.
type BGPPending struct {
	Deadline int64  `json:"deadline" doc:"unix seconds"`
	LeftS    int64  `json:"left_s" doc:"seconds left"`
	What     string `json:"what" doc:"the operation waiting"`
	By       string `json:"by" doc:"who made it (by@caller)"`
}

// BGPSettingsDoc is the settings object of GET /bgp (passwords omitted).
type BGPSettingsDoc struct {
	Enabled      bool     `json:"enabled"`
	ASN          int64    `json:"asn"`
	RouterID     string   `json:"router_id"`
	RPKI         bool     `json:"rpki"`
	Announce     []string `json:"announce"`
	Blackhole    []string `json:"blackhole"`
	KernelMetric int64    `json:"kernel_metric"`
}

// BGPView answers GET /bgp; with config=1 only {ok, config, file}.
type BGPView struct {
	OK           bool           `json:"ok"`
	Enabled      bool           `json:"enabled"`
	ASN          int64          `json:"asn"`
	RouterID     string         `json:"router_id"`
	Announce     []string       `json:"announce"`
	Blackhole    []string       `json:"blackhole"`
	Peers        []BGPPeer      `json:"peers"`
	OSPF         OSPFView       `json:"ospf"`
	RPKI         RPKIView       `json:"rpki"`
	Installed    bool           `json:"installed"`
	BirdError    *string        `json:"bird_error"`
	Problems     []string       `json:"problems"`
	Settings     BGPSettingsDoc `json:"settings"`
	KernelMetric int64          `json:"kernel_metric"`
	Pending      *BGPPending    `json:"pending"`

	// Config and File are the whole answer of GET /bgp?config=1: the
	// rendered configuration with passwords replaced by asterisks.
	Config *string `json:"config,omitempty" doc:"config=1 only: the rendered configuration, passwords as asterisks"`
	File   string  `json:"file,omitempty" doc:"config=1 only: the configuration file's path"`
}

// MarshalJSON writes {ok, config, file} for config=1, the settings
// otherwise.
func (v BGPView) MarshalJSON() ([]byte, error) {
	if v.Config != nil {
		return json.Marshal(struct {
			OK     bool   `json:"ok"`
			Config string `json:"config"`
			File   string `json:"file"`
		}{true, *v.Config, v.File})
	}
	type plain BGPView
	return json.Marshal(plain(v))
}

// BGPQuery is GET /bgp.
type BGPQuery struct {
	Config bool `json:"config" doc:"1: the rendered configuration instead of the settings"`
}

// BGPChange answers every POST /bgp/{op}.
type BGPChange struct {
	Result
	Pending  bool   `json:"pending" doc:"the change waits for confirm and undoes itself at deadline"`
	Deadline *int64 `json:"deadline" doc:"unix seconds, or null"`
	// Op and Event are what the event says; not in the answer.
	Op    string `json:"-"`
	Event string `json:"-"`
}

// EventOf publishes the change's event with the operation and outcome.
func (c *BGPChange) EventOf() (string, any) {
	return c.Event, map[string]any{"op": c.Op, "message": c.Message, "pending": c.Pending, "deadline": c.Deadline}
}

// BGPSet is POST /bgp/set.
type BGPSet struct {
	ASN      *int64  `json:"asn" api:"min=1,max=4294967295" doc:"own AS number"`
	RouterID *string `json:"router_id" api:"format=ipv4"`
	Enabled  *bool   `json:"enabled"`
	RPKI     *bool   `json:"rpki" doc:"drop routes with a proven false origin from full-table upstreams"`
}

// BGPPeerAdd is POST /bgp/peer-add: adds a peer or changes the peer of that
// name; fields not sent stay (the password too).
type BGPPeerAdd struct {
	Name               string  `json:"name" api:"required" pattern:"^[A-Za-z0-9_-]{1,32}$" hint:"1-32 letters, digits, - or _"`
	IP                 string  `json:"ip" api:"required,format=ip"`
	ASN                int64   `json:"asn" api:"required,min=1,max=4294967295"`
	Type               *string `json:"type" api:"enum=upstream|ibgp" doc:"upstream (default for a new peer) or ibgp"`
	Routes             *string `json:"routes" api:"enum=default|full" doc:"upstreams: default (default) or full"`
	Role               *string `json:"role" api:"enum=primary|backup" doc:"upstreams: primary (default) or backup (depreferred both ways)"`
	Password           *string `json:"password" api:"maxlen=80,notrim" doc:"TCP MD5; stored encrypted, never returned"`
	BlackholeCommunity *string `json:"blackhole_community" pattern:"^([0-9]{1,5}:[0-9]{1,5}|none|-)$" hint:"as:n (16-bit each), or none to remove" doc:"as:n; none (or -) removes it: an empty value counts as not sent"`
	MaxPrefix          *int64  `json:"max_prefix" api:"min=1,max=10000000" doc:"default 16 for default-route peers, 1,500,000 IPv4 / 400,000 IPv6 for full tables"`
	Multihop           *int64  `json:"multihop" api:"min=0,max=255" doc:"TTL for peers not directly connected; 0 = direct"`
	BFD                *bool   `json:"bfd"`
	Enabled            *bool   `json:"enabled" doc:"default true"`
	Description        *string `json:"description" api:"maxlen=80"`
}

// BGPPeerRef names a peer (peer-del, peer-enable, peer-disable).
type BGPPeerRef struct {
	Name string `json:"name" api:"required" pattern:"^[A-Za-z0-9_-]{1,32}$" hint:"1-32 letters, digits, - or _"`
}

// BGPPrefix is announce-add / announce-del.
type BGPPrefix struct {
	Prefix string `json:"prefix" api:"required,format=cidr" doc:"public IPv4 /8 to /24, or IPv6 /16 to /48"`
}

// BGPAddress is blackhole-add / blackhole-del.
type BGPAddress struct {
	IP string `json:"ip" api:"required,format=ip" doc:"one public address (sent as /32 or /128)"`
}

// OSPFSet is POST /bgp/ospf-set.
type OSPFSet struct {
	Enabled          *bool   `json:"enabled"`
	Area             *string `json:"area" pattern:"^([0-9]{1,10}|[0-9]{1,3}(\\.[0-9]{1,3}){3})$" hint:"a number or a dotted quad" doc:"default 0.0.0.0"`
	OriginateDefault *bool   `json:"originate_default"`
	AcceptDefault    *bool   `json:"accept_default"`
}

// OSPFIfaceAdd is POST /bgp/ospf-iface-add (adds or changes).
type OSPFIfaceAdd struct {
	Name    string `json:"name" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
	Cost    int64  `json:"cost" api:"min=1,max=65535,default=10"`
	Passive bool   `json:"passive" doc:"network announced, no neighbour sought"`
}

// OSPFIfaceRef is POST /bgp/ospf-iface-del.
type OSPFIfaceRef struct {
	Name string `json:"name" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
}

// BGPOpRef is the path of an unknown POST /bgp/{op}.
type BGPOpRef struct {
	Op string `json:"op"`
}

func bgpOp(name, path, summary string) Meta {
	return Meta{Service: "routing", Name: name, Summary: summary,
		REST: []REST{{"POST", "/bgp/" + path}}, Event: EventBGPChanged}
}

var (
	// BGPGet is GET /bgp.
	BGPGet = Define[BGPQuery, BGPView](Meta{
		Service: "routing", Name: "bgp.get", Read: true,
		Summary: "BGP and OSPF settings with each peer's live state read from BIRD (passwords never: password_set); config=1: `{ok, config, file}`, the rendered bird.conf with passwords as asterisks.",
		REST:    []REST{{"GET", "/bgp"}},
	})
	BGPSetOp     = Define[BGPSet, BGPChange](bgpOp("bgp.set", "set", "Set any of asn, router_id, enabled, rpki. Every change but blackhole-add/del waits for confirm while BGP or OSPF is on (before or after the change): pending=true, deadline; 409 while another waits or BIRD is missing; 400 settings with problems (nothing changed)."))
	BGPPeerAddOp = Define[BGPPeerAdd, BGPChange](bgpOp("bgp.peer-add", "peer-add", "Add a peer or change the peer of that name (fields not sent stay, the password too)."))
	BGPPeerDelOp = Define[BGPPeerRef, BGPChange](bgpOp("bgp.peer-del", "peer-del", "Remove a peer; 404 when none."))
	BGPPeerEnOp  = Define[BGPPeerRef, BGPChange](bgpOp("bgp.peer-enable", "peer-enable", "Enable a peer's session."))
	BGPPeerDisOp = Define[BGPPeerRef, BGPChange](bgpOp("bgp.peer-disable", "peer-disable", "Stop a peer's session and keep the peer."))
	BGPAnnAddOp  = Define[BGPPrefix, BGPChange](bgpOp("bgp.announce-add", "announce-add", "Announce a public IPv4 /8-/24 or IPv6 /16-/48 to every peer."))
	BGPAnnDelOp  = Define[BGPPrefix, BGPChange](bgpOp("bgp.announce-del", "announce-del", "Stop announcing a prefix; 404 when not announced."))
	BGPBhAddOp   = Define[BGPAddress, BGPChange](bgpOp("bgp.blackhole-add", "blackhole-add", "Blackhole one public address (RFC 7999): announced as /32 (/128) with 65535:666, each upstream's blackhole_community and NO_EXPORT, and dropped here; loaded at once, no timer."))
	BGPBhDelOp   = Define[BGPAddress, BGPChange](bgpOp("bgp.blackhole-del", "blackhole-del", "Remove a blackhole; loaded at once, no timer."))
	OSPFSetOp    = Define[OSPFSet, BGPChange](bgpOp("bgp.ospf-set", "ospf-set", "Set any of OSPF's enabled, area, originate_default, accept_default."))
	OSPFIfAddOp  = Define[OSPFIfaceAdd, BGPChange](bgpOp("bgp.ospf-iface-add", "ospf-iface-add", "Add or change an OSPF interface (cost default 10, passive)."))
	OSPFIfDelOp  = Define[OSPFIfaceRef, BGPChange](bgpOp("bgp.ospf-iface-del", "ospf-iface-del", "Remove an OSPF interface; 404 when none."))
	BGPConfirmOp = Define[None, BGPChange](bgpOp("bgp.confirm", "confirm", "Keep the change waiting for confirm; 409 when none waits."))
	BGPUndoOp    = Define[None, BGPChange](bgpOp("bgp.undo", "undo", "Undo the waiting change at once (settings and configuration); 409 when none waits."))
	BGPUnknownOp = Define[BGPOpRef, BGPChange](Meta{Service: "routing", Name: "bgp.unknown", REST: []REST{{"POST", "/bgp/{op}"}}, Summary: "Any other operation: 404 unknown operation."})
)
