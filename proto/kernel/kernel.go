// Package kernel holds, in one place, the marks by which each routerd
// service recognises the kernel state it owns in its target namespace, so
// that a reconciler removes what it owns and nothing else, two services
// never claim the same object, and an operator reading `ip route`,
// `nft list ruleset` or `ip link` can tell routerd's objects (and which
// service's) from their own.
//
// The rules for an owner:
//
//   - Each service that writes a kind of kernel object marks every object it
//     creates with its own mark from this package, and reconciles only
//     objects bearing that mark: it adds what its desired state lacks and
//     removes marked objects its desired state does not have. Objects
//     without its mark (the operator's, the kernel's, another service's) are
//     never changed or removed.
//   - A new owner adds its mark here, next to the others, before it writes
//     anything.
//
// The package has no dependencies, so any module can import it.
package kernel

// Route protocols (rtm_protocol, `ip route ... proto N`) mark routes. The
// kernel and iproute2 name 0-192 (RTPROT_KERNEL 2, RTPROT_STATIC 4,
// RTPROT_DHCP 16, bird 12, bgp 186, ospf 188, eigrp 192, ...); routerd takes
// numbers above those. `ip route` prints them as numbers unless
// /etc/iproute2/rt_protos.d names them; routerd's own listings use the
// names below.
const (
	// NetcfgRouteProtocol marks the static routes netcfg manages
	// (/router/netcfg/routes/...): 0xd5, 213. A route with this protocol
	// that netcfg has not stored is removed when netcfg reconciles.
	NetcfgRouteProtocol = 0xd5
	// DHCPRouteProtocol marks the routes of delegated prefixes dhcp
	// installs (services/dhcp/route): 0xd6, 214.
	DHCPRouteProtocol = 0xd6
	// BIRDRouteProtocol marks the routes the routing service's BIRD
	// exports to the kernel (BGP, OSPF, blackholes): RTPROT_BIRD, 12,
	// BIRD's own default. Only that BIRD writes them; netcfg and dhcp
	// never touch them.
	BIRDRouteProtocol = 12
)

// Names of the route protocols above, as routerd's listings print them.
const (
	NetcfgRouteProtocolName = "routerd"
	DHCPRouteProtocolName   = "routerd-dhcp"
)

// NftablesTablePrefix begins the name of every nftables table routerd
// creates; the rest of the name is the owning service, with an optional
// suffix after another underscore: `routerd_<service>` or
// `routerd_<service>_<what>` (e.g. routerd_subscribers, routerd_dhcp_guard).
// A service owns its tables whole, creates and deletes them as units, and
// never adds chains or rules to a table it does not own (an operator's
// `inet filter` included), so it never has to flush anything but its own.
const NftablesTablePrefix = "routerd_"

// FirewallTable is the firewall service's table (family inet): suspension
// blocks, the management ports' allow-list and bans, as set elements.
// Anti-spoofing tables of the same service are named
// `routerd_firewall_<what>`.
const FirewallTable = NftablesTablePrefix + "firewall"

// CGNATTable is the cgnat service's table (family ip): the NAT pools'
// source NAT, the CGNAT subscriber map, port forwards (destination NAT
// and their forward accept). Only the cgnat service writes it.
const CGNATTable = NftablesTablePrefix + "cgnat"

// LinkAliasPrefix begins the alias (IFLA_IFALIAS, `ip link set X alias`) of
// every link routerd creates: `routerd:<service>`, optionally followed by a
// space and free text (e.g. "routerd:subscribers vlan 100 of ge0"). Link
// names are too short (15 bytes) and operator-chosen to carry the mark; a
// service removes only links whose alias names it.
const LinkAliasPrefix = "routerd:"

// ShaperTable is the shaper service's table (family inet): the maps from a
// subscriber's address (IPv4, or IPv6 prefix) to its download class, read in
// the forward path by `meta priority set ... map`, and to its upload limit
// object (`limit name ... map`, one object per subscriber). Only the shaper
// writes it.
const ShaperTable = NftablesTablePrefix + "shaper"

// ShaperLinkAlias marks links of the shaper: earlier versions created an
// ifb per shaped interface to shape upload, "routerd:shaper ifb of
// <iface>"; upload is now policed in nftables and the shaper removes such
// links at start.
const ShaperLinkAlias = LinkAliasPrefix + "shaper"

// ShaperQdiscMajor is the handle major of the shaper's HTB roots (`tc qdisc
// show` prints "htb 7264: root"): on a subscriber-facing interface (download)
// and on its ifb (upload). A root qdisc with another handle is not the
// shaper's and is never replaced. ShaperFilterPrio is the priority of the
// redirect filter to the ifb that earlier versions put on an interface's
// ingress qdisc (removed at start with the ifb).
const (
	ShaperQdiscMajor = 0x7264
	ShaperFilterPrio = 0x7264
)
