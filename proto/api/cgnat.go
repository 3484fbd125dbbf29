package api

import (
	"net/netip"
	"strings"
)

// The cgnat service: its nftables NAT tables (NAT pools, CGNAT maps, port
// forwards) and the CGNAT audit log. This file holds the operations other
// services call; the HTTP ones (/nat, /cgnat, /pf) are declared with them.

// NATIface names an interface (a VLAN being disabled or deleted).
type NATIface struct {
	Iface string `json:"iface" api:"required"`
}

// NATUse says whether address translation depends on an interface.
type NATUse struct {
	// CGNAT is true when CGNAT translates through the interface (its WAN
	// interface, or subscribers behind it): the VLAN may be neither
	// disabled nor deleted.
	CGNAT bool   `json:"cgnat"`
	Fix   string `json:"fix,omitempty" doc:"what the operator should do first"`
	// Pool and Forwards are what a delete of the interface would remove.
	Pool     *string  `json:"pool"`
	Forwards []string `json:"forwards"`
}

// NATIfaceRemoved answers the removal of an interface's NAT.
type NATIfaceRemoved struct {
	Result
	RemovedNAT      bool     `json:"removed_nat"`
	RemovedForwards []string `json:"removed_forwards"`
}

var (
	// CGNATUses answers netcfg's refusals for VLAN disable and delete.
	CGNATUses = Define[NATIface, NATUse](Meta{
		Service: "cgnat", Name: "iface.uses",
		Summary: "Whether CGNAT translates through an interface, and its NAT pool and forwards. Only services call it.", Read: true,
	})
	// CGNATIfaceRemove removes an interface's NAT pool and forwards (a
	// VLAN deleted).
	CGNATIfaceRemove = Define[NATIface, NATIfaceRemoved](Meta{
		Service: "cgnat", Name: "iface.remove",
		Summary: "Remove the NAT pool and port forwards of an interface being deleted. Only services call it.",
	})
)

// Events of the cgnat service (router.events.cgnat.<kind>).
const (
	EventNATCreated       = "nat.created"
	EventNATDeleted       = "nat.deleted"
	EventForwardCreated   = "forward.created"
	EventForwardDeleted   = "forward.deleted"
	EventCGNATUpdated     = "cgnat.updated"
	EventCGNATAssigned    = "cgnat.assigned"
	EventCGNATReleased    = "cgnat.released"
	EventCGNATIfaceRemove = "nat.iface_removed"
	// EventCGNATNearlyFull is the alert "pool nearly full" (alert type
	// `cgnat`): published when assigned passes 90% of the capacity, once
	// each time it crosses upwards.
	EventCGNATNearlyFull = "alert.cgnat"
)

// ifacePattern is an interface name as the kernel takes it.
const ifacePattern = "^[A-Za-z0-9_.@:-]{1,15}$"

// NATPool is a source-NAT pool (Document 2, "NAT pool").
type NATPool struct {
	Iface     string   `json:"iface"`
	PoolStart string   `json:"pool_start"`
	PoolEnd   string   `json:"pool_end"`
	Exempt    []string `json:"exempt"`
	Comment   string   `json:"comment"`
	Created   string   `json:"created"`
}

// NATList is GET /nat.
type NATList struct {
	Count           int       `json:"count"`
	Pools           []NATPool `json:"pools"`
	LivePostrouting []string  `json:"live_postrouting" doc:"the kernel's source-NAT rules of routerd_cgnat, as nft prints them"`
}

// NATAdd is POST /nat.
type NATAdd struct {
	Iface     string   `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name of 1-15 letters, digits, _ . @ : -"`
	PoolStart string   `json:"pool_start" api:"required,format=ipv4"`
	PoolEnd   string   `json:"pool_end" api:"format=ipv4" doc:"omit for a single address"`
	Exempt    []string `json:"exempt" doc:"IPv4 networks never translated: a list or one comma-separated string"`
	Comment   string   `json:"comment" api:"maxlen=200"`
}

// Validate checks the range and the exempt networks.
func (r *NATAdd) Validate() error {
	if r.PoolEnd != "" && ipv4Less(r.PoolEnd, r.PoolStart) {
		return invalid("pool_end", "pool_end %s is before pool_start %s: the range is reversed", r.PoolEnd, r.PoolStart)
	}
	return validExempt("exempt", r.Exempt)
}

// NATAnswer answers POST /nat.
type NATAnswer struct {
	Result
	Pool NATPool `json:"pool"`
}

// NATDel is DELETE /nat.
type NATDel struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name"`
}

// NATDelAnswer answers DELETE /nat.
type NATDelAnswer struct {
	Result
	Iface        string  `json:"iface"`
	RulesRemoved int     `json:"rules_removed"`
	Pool         NATPool `json:"pool"`
}

// Forward is a port forward (Document 1, "Port forward"). Identity:
// proto + public_ip + public_port.
type Forward struct {
	Proto      string `json:"proto"`
	PublicIP   string `json:"public_ip" doc:"empty: any address of the router"`
	PublicPort int    `json:"public_port"`
	ClientIP   string `json:"client_ip"`
	ClientPort int    `json:"client_port"`
	Comment    string `json:"comment"`
	Created    string `json:"created"`
	// Applied is false while the client's address lies on a switched-off
	// VLAN: the forward is kept, not in the kernel.
	Applied bool `json:"applied"`
}

// ForwardList is GET /pf.
type ForwardList struct {
	Count    int       `json:"count"`
	Forwards []Forward `json:"forwards"`
	Live     []string  `json:"live" doc:"the kernel's destination-NAT rules of routerd_cgnat, as nft prints them"`
}

// ForwardAdd is POST /pf.
type ForwardAdd struct {
	Proto      string `json:"proto" api:"enum=tcp|udp,default=tcp"`
	PublicIP   string `json:"public_ip" api:"format=ipv4" doc:"empty: any address of the router"`
	PublicPort int    `json:"public_port" api:"required,min=1,max=65535"`
	ClientIP   string `json:"client_ip" api:"required,format=ipv4"`
	ClientPort int    `json:"client_port" api:"required,min=1,max=65535"`
	Comment    string `json:"comment" api:"maxlen=200"`
}

// Validate refuses addresses no forward can use.
func (r *ForwardAdd) Validate() error {
	for _, f := range []struct{ name, v string }{{"public_ip", r.PublicIP}, {"client_ip", r.ClientIP}} {
		if f.v == "" {
			continue
		}
		a, err := netip.ParseAddr(f.v)
		if err != nil || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return invalid(f.name, "invalid %s %s: a unicast IPv4 address", f.name, quoteShort(f.v))
		}
	}
	return nil
}

// ForwardAnswer answers POST /pf.
type ForwardAnswer struct {
	Result
	Forward Forward `json:"forward"`
}

// ForwardDel is DELETE /pf.
type ForwardDel struct {
	Proto      string `json:"proto" api:"enum=tcp|udp,default=tcp"`
	PublicIP   string `json:"public_ip" api:"format=ipv4" doc:"empty: the forward on any address"`
	PublicPort int    `json:"public_port" api:"required,min=1,max=65535"`
}

// ForwardDelAnswer answers DELETE /pf.
type ForwardDelAnswer struct {
	Result
	Forward Forward `json:"forward"`
}

// CGNATSample is one of the first assignments shown by GET /cgnat.
type CGNATSample struct {
	MAC       string `json:"mac"`
	PrivateIP string `json:"private_ip"`
	Public    string `json:"public" example:"203.0.113.1:1024-3071"`
	Slot      int    `json:"slot"`
}

// CGNATStatus is GET /cgnat (Document 2, "CGNAT configuration").
type CGNATStatus struct {
	Enabled   bool   `json:"enabled"`
	Iface     string `json:"iface"`
	Pool      string `json:"pool" doc:"addresses and first-last ranges, comma-separated"`
	PoolIPs   int    `json:"pool_ips"`
	PortRange string `json:"port_range" example:"1024-65535"`
	PortMin   int    `json:"port_min"`
	PortMax   int    `json:"port_max"`
	BlockSize int    `json:"block_size"`
	SubsPerIP int    `json:"subs_per_ip" doc:"(port_max - port_min + 1) / block_size, rounded down"`
	Capacity  int    `json:"capacity" doc:"pool_ips x subs_per_ip"`
	Assigned  int    `json:"assigned"`
	Free      int    `json:"free"`
	Waiting   int    `json:"waiting" doc:"clients with no slot: the pool is full"`
	// ClientsSynced is false until the subscribers service's clients
	// were read this term (until then the slots are the stored ones).
	ClientsSynced bool          `json:"clients_synced"`
	Exempt        []string      `json:"exempt"`
	Sample        []CGNATSample `json:"sample"`
	AuditLog      string        `json:"audit_log"`
}

// CGNATSet is POST /cgnat: any subset; what is not sent keeps its value.
type CGNATSet struct {
	Enabled   *bool     `json:"enabled"`
	Iface     *string   `json:"iface" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name"`
	Pool      *[]string `json:"pool" doc:"single addresses and first-last ranges (or a.b.c.d/nn), comma-separated or an array; [] empties it"`
	PortMin   *int      `json:"port_min" api:"min=1,max=65535" doc:"default 1024"`
	PortMax   *int      `json:"port_max" api:"min=1,max=65535" doc:"default 65535"`
	BlockSize *int      `json:"block_size" api:"min=1,max=65535" doc:"default 2048"`
	Exempt    *[]string `json:"exempt" doc:"networks a.b.c.d/nn never translated, string or array; [] empties it"`
}

// Validate checks the exempt networks.
func (r *CGNATSet) Validate() error {
	if r.Exempt != nil {
		for _, e := range *r.Exempt {
			if !validFormat("cidr", e) || strings.Contains(e, ":") {
				return invalid("exempt", "invalid exempt network %s: want a.b.c.d/nn", quoteShort(e))
			}
		}
	}
	return nil
}

// CGNATSetAnswer answers POST /cgnat.
type CGNATSetAnswer struct {
	Result
	Status CGNATStatus `json:"status"`
}

// CGNATLookupReq is GET /cgnat/lookup.
type CGNATLookupReq struct {
	PublicIP string `json:"public_ip" api:"required,format=ipv4"`
	Port     int    `json:"port" api:"min=0,max=65535"`
	At       string `json:"at" doc:"a past time (RFC 3339, or YYYY-MM-DD HH:MM[:SS] in UTC): answered from the audit log (a scan of it) instead of the current assignments" example:"2026-11-24 10:00:00"`
}

// CGNATLookup answers GET /cgnat/lookup: the subscriber holding the port
// on the public address now, or found:false with the question.
type CGNATLookup struct {
	Result
	Found     bool    `json:"found"`
	MAC       string  `json:"mac,omitempty"`
	PrivateIP string  `json:"private_ip,omitempty"`
	Hostname  *string `json:"hostname,omitempty"`
	PublicIP  string  `json:"public_ip"`
	Port      *int    `json:"port,omitempty"`
	PortStart *int    `json:"port_start,omitempty"`
	PortEnd   *int    `json:"port_end,omitempty"`
	Slot      *int    `json:"slot,omitempty"`
	// At and Source are set when the question named a past time: the
	// answer is the audit log's assignment in force then.
	At     string `json:"at,omitempty"`
	Source string `json:"source,omitempty" doc:"audit_log when answered for a past time"`
}

func ipv4Less(a, b string) bool {
	x, err1 := netip.ParseAddr(a)
	y, err2 := netip.ParseAddr(b)
	return err1 == nil && err2 == nil && x.Less(y)
}

func validExempt(field string, list []string) error {
	for _, e := range list {
		p, err := netip.ParsePrefix(e)
		if err != nil || !p.Addr().Is4() {
			return invalid(field, "invalid exempt network %s: want a.b.c.d/nn", quoteShort(e))
		}
	}
	return nil
}

var (
	// NATListOp is GET /nat.
	NATListOp = Define[None, NATList](Meta{
		Service: "cgnat", Name: "nat.list",
		Summary: "Source-NAT pools and the kernel's source-NAT rules (routerd_cgnat's postrouting chain).",
		REST:    []REST{{"GET", "/nat"}}, Action: "nat-list", Read: true,
	})
	// NATAddOp is POST /nat.
	NATAddOp = Define[NATAdd, NATAnswer](Meta{
		Service: "cgnat", Name: "nat.add",
		Summary: "Add (or replace) the source-NAT pool of an interface: traffic leaving it is translated to pool_start-pool_end, the exempt networks untranslated. 404 when the interface does not exist; 500 when the kernel refuses the rules (nothing stored).",
		REST:    []REST{{"POST", "/nat"}}, Action: "nat-add", Status: 201, Event: EventNATCreated,
	})
	// NATDelOp is DELETE /nat.
	NATDelOp = Define[NATDel, NATDelAnswer](Meta{
		Service: "cgnat", Name: "nat.delete",
		Summary: "Remove the source-NAT pool of an interface; 404 when it has none.",
		REST:    []REST{{"DELETE", "/nat"}}, Action: "nat-del", Event: EventNATDeleted,
	})
	// PFList is GET /pf and /portforward.
	PFList = Define[None, ForwardList](Meta{
		Service: "cgnat", Name: "forwards.list",
		Summary: "Port forwards, and the kernel's destination-NAT rules. A forward whose client lies on a switched-off VLAN is listed with applied:false.",
		REST:    []REST{{"GET", "/pf"}, {"GET", "/portforward"}}, Action: "pf-list", Read: true,
	})
	// PFAdd is POST /pf.
	PFAdd = Define[ForwardAdd, ForwardAnswer](Meta{
		Service: "cgnat", Name: "forwards.add",
		Summary: "Add a port forward: destination NAT of proto public_ip:public_port (any router address when public_ip is empty) to client_ip:client_port, and the forward accept. 409 when a forward of that proto, public_ip and public_port exists.",
		REST:    []REST{{"POST", "/pf"}, {"POST", "/portforward"}, {"POST", "/network/pf-add"}}, Action: "pf-add", Status: 201,
		Event: EventForwardCreated,
	})
	// PFDel is DELETE /pf.
	PFDel = Define[ForwardDel, ForwardDelAnswer](Meta{
		Service: "cgnat", Name: "forwards.delete",
		Summary: "Remove the port forward of proto, public_ip (empty: the one on any address) and public_port; 404 when none matches.",
		REST:    []REST{{"DELETE", "/pf"}, {"DELETE", "/portforward"}, {"POST", "/network/pf-delete"}}, Action: "pf-del",
		Event: EventForwardDeleted,
	})
	// CGNATGet is GET /cgnat.
	CGNATGet = Define[None, CGNATStatus](Meta{
		Service: "cgnat", Name: "cgnat.get",
		Summary: "The CGNAT configuration with its capacity and the first five assignments.",
		REST:    []REST{{"GET", "/cgnat"}}, Action: "cgnat-status", Read: true,
	})
	// CGNATSetOp is POST /cgnat.
	CGNATSetOp = Define[CGNATSet, CGNATSetAnswer](Meta{
		Service: "cgnat", Name: "cgnat.set",
		Summary: "Change any subset of the CGNAT configuration. Enabling needs an existing iface and a non-empty pool. Slots stay with their subscribers; a change of pool, ports or block size moves every mapping (each logged to the audit log).",
		REST:    []REST{{"POST", "/cgnat"}, {"POST", "/network/cgnat-set"}}, Action: "cgnat-set", Event: EventCGNATUpdated,
	})
	// CGNATLookupOp is GET /cgnat/lookup.
	CGNATLookupOp = Define[CGNATLookupReq, CGNATLookup](Meta{
		Service: "cgnat", Name: "cgnat.lookup",
		Summary: "Which subscriber holds port on public_ip now (from the slot formula, O(1)); found:false when none. With `at`, who held it at that past time, from the audit log (the last assignment of that address and block before it, unless released since).",
		REST:    []REST{{"GET", "/cgnat/lookup"}}, Action: "cgnat-lookup", Read: true,
	})
)

// CGNATConfig is the cgnat service's configuration document,
// etc/cgnat.json: the CGNAT settings, NAT pools and port forwards (the
// slots are state, not configuration). Its place in ConfigOwners (the
// restore order) belongs in system.go.
var CGNATConfig = configOwner("cgnat", "etc/cgnat.json")
