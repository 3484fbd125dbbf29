package api

import (
	"encoding/json"
	"time"

	"routerd.dev/proto/event"
)

// The router's own network configuration (Document 1, "Network
// configuration document", "Network apply", "Router network
// configuration"): the netcfg service's ports and bonds, changed through a
// dry run (plan) and an apply that waits 120 s for confirm and is rolled
// back otherwise, also across a crash or power cut.

// NetPort is a port of the network document.
type NetPort struct {
	Name string `json:"name"`
	MAC  string `json:"mac"`
	MTU  *int   `json:"mtu" doc:"576-9216, or null for the default (1500)"`
	Up   bool   `json:"up"`
}

// NetBond is a bond of the network document.
type NetBond struct {
	Name    string         `json:"name" example:"bond0"`
	Members []string       `json:"members"`
	Mode    string         `json:"mode" doc:"802.3ad, active-backup, balance-rr, balance-xor, balance-tlb, balance-alb, broadcast"`
	Params  map[string]any `json:"params" doc:"lacp-rate (slow, fast; 802.3ad only), transmit-hash-policy (layer2, layer2+3, layer3+4, encap2+3, encap3+4), mii-monitor-interval (0-10000 ms)"`
	MTU     *int           `json:"mtu,omitempty"`
}

// NetConfig is the stored network document: ports and bonds.
type NetConfig struct {
	Ports []NetPort `json:"ports"`
	Bonds []NetBond `json:"bonds"`
}

// NetIfaceRecord is an interface record of GET /network.
type NetIfaceRecord struct {
	Name       string   `json:"name"`
	Kind       string   `json:"kind" doc:"port, bond, vlan, ifb, bmc (server management USB link, not a router port), other"`
	MAC        string   `json:"mac"`
	MTU        int      `json:"mtu"`
	Up         bool     `json:"up"`
	Carrier    bool     `json:"carrier"`
	Master     string   `json:"master"`
	Parent     string   `json:"parent"`
	VID        *int     `json:"vid"`
	Protocol   *string  `json:"protocol"`
	BondMode   *string  `json:"bond_mode"`
	SpeedMbps  *int     `json:"speed_mbps"`
	Driver     string   `json:"driver"`
	Addresses  []string `json:"addresses"`
	Configured bool     `json:"configured" doc:"in the network document or a managed VLAN"`
	Owner      string   `json:"owner" doc:"network, vlans, services, shaper, or empty for interfaces the router did not create"`
	Shapes     bool     `json:"shapes" doc:"the shaper shapes traffic on it"`
	Uplink     bool     `json:"uplink" doc:"a default route goes out through it"`
}

// NetAddrRecord is an address record of GET /network.
type NetAddrRecord struct {
	Iface      string `json:"iface"`
	CIDR       string `json:"cidr"`
	Family     int    `json:"family"`
	Source     string `json:"source" doc:"where it is configured: vlans (a managed VLAN), ports (an address stored for a port or bond), kernel (live but configured nowhere)"`
	Configured bool   `json:"configured"`
	Live       bool   `json:"live"`
	Dynamic    bool   `json:"dynamic" doc:"leased (DHCP, SLAAC): not permanent"`
}

// ServiceVLAN is a VLAN a fibre service runs on.
type ServiceVLAN struct {
	Iface string  `json:"iface"`
	OLT   string  `json:"olt"`
	PON   string  `json:"pon"`
	SVLAN int     `json:"svlan"`
	CVLAN int     `json:"cvlan"`
	IPv4  *string `json:"ipv4"`
	IPv6  *string `json:"ipv6"`
}

// NetRoute is a kernel default route.
type NetRoute struct {
	To       string `json:"to"`
	Via      string `json:"via"`
	Dev      string `json:"dev"`
	Protocol string `json:"protocol"`
	Metric   int    `json:"metric"`
}

// NetRoutes is the routes object of GET /network.
type NetRoutes struct {
	DefaultKernel []NetRoute `json:"default_kernel"`
	Static        []Route    `json:"static"`
}

// NetPending is an apply waiting for confirm.
type NetPending struct {
	Deadline int64  `json:"deadline" doc:"unix seconds"`
	LeftS    int64  `json:"left_s"`
	By       string `json:"by,omitempty"`
}

// NetworkDoc answers GET /network.
type NetworkDoc struct {
	Result
	Generated    string           `json:"generated" example:"2026-11-24 10:00:00"`
	Managed      bool             `json:"managed" doc:"false while no network configuration is stored (POST /network/adopt stores one)"`
	Version      string           `json:"version" doc:"short hash of the stored document; empty while none is stored"`
	Config       NetConfig        `json:"config"`
	Uplinks      []string         `json:"uplinks"`
	Interfaces   []NetIfaceRecord `json:"interfaces"`
	Addresses    []NetAddrRecord  `json:"addresses"`
	ServiceVLANs []ServiceVLAN    `json:"service_vlans"`
	Routes       NetRoutes        `json:"routes"`
	Drift        []string         `json:"drift"`
	Pending      *NetPending      `json:"pending"`
}

// PortChange is one port's change: only the fields sent change.
type PortChange struct {
	Up *bool `json:"up"`
	// MTU absent leaves it; null sets the default; a number 576-9216.
	MTU    json.RawMessage `json:"mtu"`
	Remove bool            `json:"remove" doc:"stop managing the port (refused while it is a bond member, carries addresses or has VLANs)"`
}

// BondChange is one bond's change: only the fields sent change; a new
// bond needs members and mode.
type BondChange struct {
	Members []string `json:"members"`
	Mode    string   `json:"mode"`
	// Params: a value of null resets that parameter.
	Params map[string]any  `json:"params"`
	MTU    json.RawMessage `json:"mtu"`
	Remove bool            `json:"remove" doc:"delete the bond (its members are released)"`
}

// NetworkChange is POST /network/plan and /network/apply.
type NetworkChange struct {
	Version string                `json:"version" pattern:"^[0-9a-f]{1,64}$" hint:"the version GET /network gave" doc:"plan: optional (stale = 409); apply: required"`
	Ports   map[string]PortChange `json:"ports" doc:"port name to {up, mtu, remove}"`
	Bonds   map[string]BondChange `json:"bonds" doc:"bond name to {members, mode, params, mtu, remove}"`
	Local   string                `json:"local" api:"format=ip" doc:"the router address the caller came to: a change removing it is refused"`
}

// NetworkPlan answers POST /network/plan.
type NetworkPlan struct {
	Result
	Version       string   `json:"version"`
	Changes       []string `json:"changes"`
	Report        string   `json:"report" doc:"the stored document before and after, as a unified diff"`
	Refused       []string `json:"refused"`
	AddressesGone []string `json:"addresses_gone" doc:"addresses that would leave the kernel or go down with their interface (iface cidr)"`
	Pending       bool     `json:"pending" doc:"an apply is waiting for confirm"`
}

// NetworkApplied answers POST /network/apply.
type NetworkApplied struct {
	Result
	RC       int      `json:"rc"`
	Pending  int64    `json:"pending" doc:"seconds left to confirm"`
	Deadline int64    `json:"deadline" doc:"unix seconds"`
	Text     string   `json:"text"`
	Changes  []string `json:"changes"`
	Version  string   `json:"version"`
}

// NetworkDone answers confirm and rollback.
type NetworkDone struct {
	Result
	Text string `json:"text"`
	RC   int    `json:"rc"`
}

// NetworkAdopt is POST /network/adopt.
type NetworkAdopt struct {
	Ports []string `json:"ports" doc:"the ports to manage; default every port of the kernel (not loopback, VLANs, bonds, or the server's management USB link)"`
}

// Network apply events (router.events.netcfg.*).
const (
	NetworkPendingEvent    = "network.pending"
	NetworkConfirmedEvent  = "network.confirmed"
	NetworkRolledBackEvent = "network.rolledback"
	NetworkAdoptedEvent    = "network.adopted"
)

// NetworkConfirmWindow is the spec's rollback timer (Limits: 120 s).
const NetworkConfirmWindow = 120 * time.Second

var (
	// NetworkGet is GET /network.
	NetworkGet = Define[None, NetworkDoc](Meta{
		Service: "netcfg", Name: "network.get", Read: true,
		Summary: "The network configuration document: the stored ports and bonds (`config`, `version`), interface and address records read from the kernel, uplinks, service VLANs, default and static routes, `drift` between store and kernel, and `pending` while an apply waits for confirm. 500 when the kernel cannot be read.",
		REST:    []REST{{"GET", "/network"}},
	})
	// NetworkPlanOp is POST /network/plan.
	NetworkPlanOp = Define[NetworkChange, NetworkPlan](Meta{
		Service: "netcfg", Name: "network.plan", Read: true,
		Summary: "Dry run of a change of ports and bonds: `changes`, a `report` diff, `refused` (lock-out and field rules) and `addresses_gone`; touches nothing. 400 with `problems` for invalid fields, nothing changing, or no stored configuration; 409 with `version` when a sent version is stale.",
		REST:    []REST{{"POST", "/network/plan"}},
	})
	// NetworkApplyOp is POST /network/apply.
	NetworkApplyOp = Define[NetworkChange, NetworkApplied](Meta{
		Service: "netcfg", Name: "network.apply", Timeout: 60 * time.Second, Concurrency: 1,
		Summary: "Apply a change of ports and bonds (`version` required): the document and a configuration version are saved, the rendered systemd-networkd files backed up, the new ones written, checked and applied to the kernel, and the 120 s rollback timer armed (pending state and backup in etcd and on disk before the answer). 400 invalid, nothing changes, or refused (each reason `refused: ...`; nothing applied); 409 stale version (with `version`) or an apply already pending (with `left_s`); 500 when the apply failed (files, document and kernel restored).",
		REST:    []REST{{"POST", "/network/apply"}},
	})
	// NetworkConfirmOp is POST /network/confirm.
	NetworkConfirmOp = Define[None, NetworkDone](Meta{
		Service: "netcfg", Name: "network.confirm", Concurrency: 1,
		Summary: "Keep the applied change waiting for confirm. 400 ok=false when nothing waits.",
		REST:    []REST{{"POST", "/network/confirm"}},
	})
	// NetworkRollbackOp is POST /network/rollback.
	NetworkRollbackOp = Define[None, NetworkDone](Meta{
		Service: "netcfg", Name: "network.rollback", Timeout: 60 * time.Second, Concurrency: 1,
		Summary: "Undo the change waiting for confirm at once: files, stored document and kernel restored. 400 ok=false when nothing waits or the rollback failed.",
		REST:    []REST{{"POST", "/network/rollback"}},
	})
	// NetworkAdoptOp is POST /network/adopt (not shown in the spec).
	NetworkAdoptOp = Define[NetworkAdopt, NetworkDoc](Meta{
		Service: "netcfg", Name: "network.adopt", Status: 201, Event: NetworkAdoptedEvent,
		Summary: "Start managing the router's network (not shown in the spec): store the ports as the kernel has them now (name, MAC, MTU, up) as the network document, changing nothing in the kernel. 201 with the document; 409 when one is stored already; 404 for a named port that does not exist.",
		REST:    []REST{{"POST", "/network/adopt"}},
	})
)

// The immediate VLAN and address operations of the monitor's settings
// tab (POST /network/vlan-*, /network/ip-*): not timed, no version;
// whatever could cut the router off is refused first (409, `refused`).

// NetVLANCheck is POST /network/vlan-check.
type NetVLANCheck struct {
	Name   string `json:"name" api:"required" pattern:"^(vlan|svlan)[0-9]{1,4}(\\.[0-9]{1,4})?$" hint:"vlan<id>, svlan<id> or svlan<id>.<cvlan>"`
	Action string `json:"action" doc:"delete checks a delete; anything else a disable"`
	Local  string `json:"local" api:"format=ip" doc:"the router address the caller came to"`
}

// NetCheckAnswer answers vlan-check and ip-check: what would be refused
// and what would be affected; nothing changes.
type NetCheckAnswer struct {
	Result
	Name    string   `json:"name,omitempty"`
	Refused []string `json:"refused"`
	Impact  []string `json:"impact"`
}

// NetVLANAdd is POST /network/vlan-add.
type NetVLANAdd struct {
	Parent   string `json:"parent" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an existing port, bond or S-VLAN"`
	VLANID   int    `json:"vlan_id" api:"required,min=1,max=4094"`
	Protocol string `json:"protocol" doc:"802.1ad for QinQ (an S-VLAN); anything else 802.1Q"`
	IP       string `json:"ip" api:"format=cidr"`
	IPv6     string `json:"ipv6" api:"format=cidr"`
	Label    string `json:"label" api:"maxlen=80"`
	Serve    *bool  `json:"serve" doc:"default true; false = bare link"`
}

// NetVLANChange is POST /network/vlan-disable, -enable and -delete.
type NetVLANChange struct {
	Name   string `json:"name" api:"required" pattern:"^(vlan|svlan)[0-9]{1,4}(\\.[0-9]{1,4})?$" hint:"vlan<id>, svlan<id> or svlan<id>.<cvlan>"`
	Reason string `json:"reason" api:"maxlen=200" doc:"disable: a note kept with the VLAN"`
	Local  string `json:"local" api:"format=ip" doc:"the router address the caller came to"`
}

// NetIPChange is POST /network/ip-check, ip-add and ip-delete.
type NetIPChange struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"a port, bond or VLAN"`
	IP    string `json:"ip" api:"required,format=cidr" doc:"CIDR"`
	Local string `json:"local" api:"format=ip" doc:"the router address the caller came to"`
}

var (
	// NetVLANCheckOp is POST /network/vlan-check.
	NetVLANCheckOp = Define[NetVLANCheck, NetCheckAnswer](Meta{
		Service: "netcfg", Name: "network.vlan-check", Read: true,
		Summary: "What a disable (or, with action=delete, a delete) of a VLAN would refuse and affect; changes nothing. 404 when the VLAN is not configured.",
		REST:    []REST{{"POST", "/network/vlan-check"}},
	})
	// NetVLANAddOp is POST /network/vlan-add.
	NetVLANAddOp = Define[NetVLANAdd, VLANAddAnswer](Meta{
		Service: "netcfg", Name: "network.vlan-add", Event: event.VLANCreated,
		Summary: "As POST /vlans, answered 200 on success (otherwise the underlying 400-599).",
		REST:    []REST{{"POST", "/network/vlan-add"}},
	})
	// NetVLANDisableOp is POST /network/vlan-disable.
	NetVLANDisableOp = Define[NetVLANChange, VLANDisableAnswer](Meta{
		Service: "netcfg", Name: "network.vlan-disable", Event: event.VLANDisabled,
		Summary: "As POST /vlans/disable, refused (409 with `refused`) when a default route (live or configured) goes out of the VLAN, when it holds an SSH session's address, the API listen address or `local`, when interfaces run on top of it, clients are registered on it or CGNAT translates through it; 404 not configured.",
		REST:    []REST{{"POST", "/network/vlan-disable"}},
	})
	// NetVLANEnableOp is POST /network/vlan-enable.
	NetVLANEnableOp = Define[NetVLANChange, VLANEnableAnswer](Meta{
		Service: "netcfg", Name: "network.vlan-enable", Event: event.VLANEnabled,
		Summary: "As POST /vlans/enable; 404 not configured.",
		REST:    []REST{{"POST", "/network/vlan-enable"}},
	})
	// NetVLANDeleteOp is POST /network/vlan-delete.
	NetVLANDeleteOp = Define[NetVLANChange, VLANDeleteAnswer](Meta{
		Service: "netcfg", Name: "network.vlan-delete", Event: event.VLANDeleted,
		Summary: "As DELETE /vlans, refused (409 with `refused`) as vlan-disable is, and while any interface runs on top; 404 not configured.",
		REST:    []REST{{"POST", "/network/vlan-delete"}},
	})
	// NetIPCheckOp is POST /network/ip-check.
	NetIPCheckOp = Define[NetIPChange, NetCheckAnswer](Meta{
		Service: "netcfg", Name: "network.ip-check", Read: true,
		Summary: "What removing an address would refuse and affect; changes nothing.",
		REST:    []REST{{"POST", "/network/ip-check"}},
	})
	// NetIPAddOp is POST /network/ip-add.
	NetIPAddOp = Define[NetIPChange, AddrAnswer](Meta{
		Service: "netcfg", Name: "network.ip-add",
		Summary: "As POST /ip, answered 200 (`persisted`); 409 for a service VLAN.",
		REST:    []REST{{"POST", "/network/ip-add"}},
	})
	// NetIPDeleteOp is POST /network/ip-delete.
	NetIPDeleteOp = Define[NetIPChange, AddrAnswer](Meta{
		Service: "netcfg", Name: "network.ip-delete",
		Summary: "As DELETE /ip, refused (409 with `refused`) for a service VLAN, an address leased by DHCP, an SSH session's, the API's or `local` address, one through which the default route's gateway is reached, or a registered client's gateway.",
		REST:    []REST{{"POST", "/network/ip-delete"}},
	})
)
