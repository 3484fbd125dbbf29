package api

import "routerd.dev/proto/event"

// The netcfg service's links and addresses (Document 2: VLANs, addresses,
// GET /iface).

// VLAN is a VLAN record of GET /vlans.
type VLAN struct {
	Name     string   `json:"name" doc:"vlan<id> (802.1Q on a port or bond), svlan<id> (802.1ad), svlan<id>.<cvlan> (C-VLAN inside an S-VLAN)" example:"svlan200.116"`
	Parent   string   `json:"parent"`
	VLANID   int      `json:"vlan_id"`
	Protocol string   `json:"protocol" doc:"802.1Q or 802.1ad"`
	IPs      []string `json:"ips" doc:"stored IPv4 addresses (CIDR)"`
	IPs6     []string `json:"ips6" doc:"stored IPv6 addresses (CIDR)"`
	Label    string   `json:"label"`
	Added    string   `json:"added" example:"2026-11-24 10:00:00"`
	Enabled  bool     `json:"enabled"`
	// DisabledAt and Reason are kept while the VLAN is disabled.
	DisabledAt string   `json:"disabled_at,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	Live       bool     `json:"live" doc:"the interface exists"`
	Status     string   `json:"status" doc:"link state (UP, DOWN, LOWERLAYERDOWN...), DISABLED, or NOT CREATED"`
	LiveIPs    []string `json:"live_ips"`
	LiveIPs6   []string `json:"live_ips6"`
}

// VLANList answers GET /vlans.
type VLANList struct {
	Count int    `json:"count"`
	VLANs []VLAN `json:"vlans"`
}

// VLANAdd is POST /vlans.
type VLANAdd struct {
	Parent   string `json:"parent" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an existing port, bond or S-VLAN"`
	VLANID   int    `json:"vlan_id" api:"required,min=1,max=4094"`
	Protocol string `json:"protocol" api:"enum=802.1Q|802.1ad,default=802.1Q"`
	IP       string `json:"ip" api:"format=cidr" doc:"IPv4 gateway address in CIDR; a network address is corrected to the first host, with a note"`
	IPv6     string `json:"ipv6" api:"format=cidr" doc:"IPv6 address in CIDR"`
	Label    string `json:"label" api:"maxlen=80"`
	Serve    *bool  `json:"serve" doc:"default true: serve it by DHCPv4, DHCPv6 and prefix delegation; false: link only"`
	Force    bool   `json:"force" doc:"allow an address overlapping one on another interface"`
}

// Served reports each serving step of a new VLAN.
type Served struct {
	Net  any `json:"net"`
	Net6 any `json:"net6"`
	PD   any `json:"pd"`
}

// VLANAddAnswer answers POST /vlans.
type VLANAddAnswer struct {
	Result
	Name     string  `json:"name"`
	Parent   string  `json:"parent"`
	VLANID   int     `json:"vlan_id"`
	Protocol string  `json:"protocol"`
	IP       string  `json:"ip"`
	IPv6     string  `json:"ipv6"`
	Served   *Served `json:"served"`
	Warning  string  `json:"warning,omitempty"`
	Note     string  `json:"note,omitempty"`
}

// EventOf publishes vlan.created with the VLAN.
func (a *VLANAddAnswer) EventOf() (string, any) {
	return event.VLANCreated, map[string]any{"name": a.Name, "parent": a.Parent, "vlan_id": a.VLANID, "protocol": a.Protocol, "ip": a.IP, "ipv6": a.IPv6}
}

// VLANRef names a VLAN (and, for disable, why).
type VLANRef struct {
	Name   string `json:"name" api:"required" pattern:"^(vlan|svlan)[0-9]{1,4}(\\.[0-9]{1,4})?$" hint:"vlan<id>, svlan<id> or svlan<id>.<cvlan>"`
	Reason string `json:"reason" api:"maxlen=200" doc:"disable: a note kept with the VLAN"`
}

// VLANDeleteAnswer answers DELETE /vlans.
type VLANDeleteAnswer struct {
	Result
	Name            string         `json:"name"`
	RemovedSubnets  []string       `json:"removed_subnets"`
	RemovedPDPool   any            `json:"removed_pd_pool"`
	RemovedRoutes   []string       `json:"removed_routes"`
	RemovedNAT      any            `json:"removed_nat"`
	RemovedForwards []string       `json:"removed_forwards"`
	Kept            map[string]any `json:"kept"`
}

// EventOf publishes vlan.deleted.
func (a *VLANDeleteAnswer) EventOf() (string, any) {
	return event.VLANDeleted, map[string]any{"name": a.Name}
}

// VLANDisableAnswer answers POST /vlans/disable.
type VLANDisableAnswer struct {
	Result
	Name                string   `json:"name"`
	Enabled             bool     `json:"enabled"`
	DisabledAt          string   `json:"disabled_at"`
	Reason              string   `json:"reason"`
	TookOffline         []string `json:"took_offline"`
	Kept                string   `json:"kept"`
	ForwardsStillActive []string `json:"forwards_still_active"`
	// Warning says what could not be taken offline (a dhcp service that
	// did not answer); ours, absent when everything was.
	Warning string `json:"warning,omitempty"`
}

// EventOf publishes vlan.disabled.
func (a *VLANDisableAnswer) EventOf() (string, any) {
	return event.VLANDisabled, map[string]any{"name": a.Name, "reason": a.Reason, "disabled_at": a.DisabledAt}
}

// VLANEnableAnswer answers POST /vlans/enable.
type VLANEnableAnswer struct {
	Result
	Name              string   `json:"name"`
	Enabled           bool     `json:"enabled"`
	Restored          []string `json:"restored"`
	ForwardsActive    []string `json:"forwards_active"`
	WasDisabledAt     string   `json:"was_disabled_at"`
	WasDisabledReason string   `json:"was_disabled_reason"`
	// Warning says what could not be restored (a dhcp service that did
	// not answer); ours, absent when everything was.
	Warning string `json:"warning,omitempty"`
}

// EventOf publishes vlan.enabled.
func (a *VLANEnableAnswer) EventOf() (string, any) {
	return event.VLANEnabled, map[string]any{"name": a.Name}
}

// AddrChange is POST /ip and DELETE /ip.
type AddrChange struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name"`
	IP    string `json:"ip" api:"required,format=cidr" doc:"CIDR, IPv4 or IPv6; a network address is corrected to the first host"`
	Force bool   `json:"force" doc:"the action form only (ip-add force=1): allow a subnet already on another interface"`
}

// AddrAnswer answers POST /ip and DELETE /ip.
type AddrAnswer struct {
	Result
	Persisted bool   `json:"persisted"`
	Requested string `json:"requested,omitempty"`
	Assigned  string `json:"assigned,omitempty"`
	Note      string `json:"note,omitempty"`
	// Delete: a DHCP subnet or delegation range left unused is named.
	Warning      string `json:"warning,omitempty"`
	UnusedSubnet any    `json:"unused_subnet,omitempty"`
	UnusedPDPool any    `json:"unused_pd_pool,omitempty"`
	PDWarning    string `json:"pd_warning,omitempty"`

	iface, ip, kind string
}

// SetEvent says what the answer's event is (the adapter publishes it).
func (a *AddrAnswer) SetEvent(kind, iface, ip string) { a.kind, a.iface, a.ip = kind, iface, ip }

// EventOf publishes address.added or address.deleted.
func (a *AddrAnswer) EventOf() (string, any) {
	return a.kind, map[string]any{"iface": a.iface, "ip": a.ip}
}

// Iface is a record of GET /iface.
type Iface struct {
	Name      string   `json:"name"`
	Type      string   `json:"type" doc:"physical, vlan, svlan, cvlan, usb, loopback (and bond, bridge, veth, other for what the spec does not name)"`
	Status    string   `json:"status" doc:"UP only when the link is up and has carrier; otherwise DOWN"`
	Parent    string   `json:"parent"`
	IPs       []string `json:"ips"`
	IPs6      []string `json:"ips6"`
	VLANID    *int     `json:"vlan_id"`
	VLANProto *string  `json:"vlan_proto"`
	MTU       int      `json:"mtu"`
	SpeedMbps *int     `json:"speed_mbps" doc:"null where the kernel does not say"`
	RxBytes   uint64   `json:"rx_bytes"`
	TxBytes   uint64   `json:"tx_bytes"`
}

// IfaceList answers GET /iface.
type IfaceList struct {
	Interfaces []Iface `json:"interfaces"`
}

var (
	// VLANsList is GET /vlans.
	VLANsList = Define[None, VLANList](Meta{
		Service: "netcfg", Name: "vlans.list",
		Summary: "Managed VLANs with their stored and live state.",
		REST:    []REST{{"GET", "/vlans"}}, Action: "vlan-list", Read: true,
	})
	// VLANsCreate is POST /vlans.
	VLANsCreate = Define[VLANAdd, VLANAddAnswer](Meta{
		Service: "netcfg", Name: "vlans.create",
		Summary: "Create a VLAN (201): the link is created, marked routerd:netcfg and brought up, its addresses added; stored first, the kernel change undone if it fails (500 with the kernel's refusal). 404 parent not found; 409 VLAN exists, tag already used on that parent, or address overlapping another interface's (`conflict`; pass force). Serving steps, each asked of the dhcp service and reported under `served`: DHCPv4 (POST /net's operation) when the VLAN has an IPv4 address, DHCPv6 with its pool (POST /net6) and a prefix-delegation slice (POST /pd) when it has an IPv6 one; a failed step is `{error, retry}` with a `warning` and never undoes the VLAN. serve=false: `served` null and a `note` naming those commands.",
		REST:    []REST{{"POST", "/vlans"}}, Action: "vlan-add", Status: 201, Event: event.VLANCreated,
	})
	// VLANsDelete is DELETE /vlans.
	VLANsDelete = Define[VLANRef, VLANDeleteAnswer](Meta{
		Service: "netcfg", Name: "vlans.delete",
		Summary: "Delete a VLAN: link and stored record removed. 404 not a managed VLAN; 409 another VLAN uses it as parent (`fix`). Registered clients and CGNAT are checked when those services exist.",
		REST:    []REST{{"DELETE", "/vlans"}}, Action: "vlan-del", Event: event.VLANDeleted,
	})
	// VLANsDisable is POST /vlans/disable (GET with the same query).
	VLANsDisable = Define[VLANRef, VLANDisableAnswer](Meta{
		Service: "netcfg", Name: "vlans.disable",
		Summary: "Disable a VLAN: the link is taken down, everything else kept; disabled_at and reason stored. 404; 409 already disabled or an enabled VLAN on top.",
		REST:    []REST{{"POST", "/vlans/disable"}, {"GET", "/vlans/disable"}}, Action: "vlan-disable", Event: event.VLANDisabled,
	})
	// VLANsEnable is POST /vlans/enable.
	VLANsEnable = Define[VLANRef, VLANEnableAnswer](Meta{
		Service: "netcfg", Name: "vlans.enable",
		Summary: "Enable a disabled VLAN: link up, addresses restored. 404; 409 already enabled or parent disabled.",
		REST:    []REST{{"POST", "/vlans/enable"}}, Action: "vlan-enable", Event: event.VLANEnabled,
	})
	// AddrAdd is POST /ip.
	AddrAdd = Define[AddrChange, AddrAnswer](Meta{
		Service: "netcfg", Name: "addresses.create",
		Summary: "Add an address (201); a network address is corrected to the first host (`requested`, `assigned`, `note`). Stored with the VLAN on a managed VLAN, otherwise with the port. An address already live is only persisted. 404 interface not found; 409 subnet already on another interface (the action form's force=1 overrides).",
		REST:    []REST{{"POST", "/ip"}}, Action: "ip-add", Status: 201, Event: event.AddrAdded,
	})
	// AddrDelete is DELETE /ip.
	AddrDelete = Define[AddrChange, AddrAnswer](Meta{
		Service: "netcfg", Name: "addresses.delete",
		Summary: "Remove an address from the kernel and the store. 404 interface or address not found. Other methods on /ip are 400.",
		REST:    []REST{{"DELETE", "/ip"}}, Action: "ip-del", Event: event.AddrDeleted,
	})
	// AddrOther answers the other methods on /ip with a 400.
	AddrOther = Define[None, Result](Meta{
		Service: "netcfg", Name: "addresses.other",
		Summary: "Any other method on /ip: 400 naming POST /ip and DELETE /ip.",
		REST:    []REST{{AnyMethod, "/ip"}}, Read: true,
	})
	// IfaceListOp is GET /iface.
	IfaceListOp = Define[None, IfaceList](Meta{
		Service: "netcfg", Name: "iface.list",
		Summary: "Every interface of the router's namespace with type, status, addresses and counters.",
		REST:    []REST{{"GET", "/iface"}}, Action: "iface-list", Read: true,
	})
)
