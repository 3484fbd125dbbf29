package api

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
