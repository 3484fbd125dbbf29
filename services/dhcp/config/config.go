// Package config holds the typed configuration of the DHCP engine.
//
// The shape follows the HTTP contract so that each area maps onto one field:
// POST /net fills Networks, POST /net6 and /net6/pool fill Networks6,
// POST /net6/lease fills Lifetimes6, /pd fills PD, /dns fills DNS,
// /option82 fills Option82, the MAC-based clients fill Clients and the fibre
// services fill Services. A configuration is validated whole by Validate: the
// engine refuses an invalid one and keeps the previous one (the spec's
// "rolled back").
package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"routerd.dev/shared/mac"
)

// Defaults that the spec names; they live here and only here.
const (
	DefaultLeaseTime4      = time.Hour
	DefaultValid6          = 4000 * time.Second
	DefaultPDLen           = 64
	DefaultPDSlice         = 256
	DefaultQuarantine      = 10 * time.Minute
	DefaultRAInterval      = 200 * time.Second
	DefaultRouterLifetime  = 1800 * time.Second
	MinValid6              = 120 * time.Second
	maxHostname            = 63
	maxPoolSize6           = 1 << 24 // bitmap bound: 2 MiB per pool
	maxPDSlice             = 1 << 24
	defaultOfferHold       = 30 * time.Second
	defaultReclaimInterval = 10 * time.Second
	defaultCacheThreshold  = 0.25
)

// Config is everything the engine serves. The zero value serves nothing.
type Config struct {
	// Networks are the IPv4 served networks (GET /networks, POST /net).
	Networks []Network `json:"networks"`
	// Networks6 are the IPv6 served networks (POST /net6); each also gets
	// router advertisements on its interface.
	Networks6 []Network6 `json:"networks6"`
	// Lifetimes6 are the DHCPv6 address and prefix lifetimes (POST /net6/lease).
	Lifetimes6 Lifetimes6 `json:"lifetimes6"`
	// PD is router-wide prefix delegation (GET /pd).
	PD PD `json:"pd"`
	// DNS is the resolvers and domain handed to subscribers (GET /dns).
	DNS DNS `json:"dns"`
	// Option82 switches use of relay agent information (POST /option82).
	Option82 Option82 `json:"option82"`
	// Clients are the MAC-based clients: fixed IPv4, optional IPv6, hostname.
	Clients []Client `json:"clients"`
	// Services are fibre subscribers recognised by PON port and ONT id.
	Services []Service `json:"services"`
	// RA tunes router advertisements.
	RA RA `json:"ra"`
	// Timers tunes the engine's housekeeping; zero values take defaults.
	Timers Timers `json:"timers"`
	// Suspended are the interfaces whose serving is suspended (netcfg's
	// disabled VLANs, through serving.set): their networks, pools,
	// delegation slice and resolvers stay configured, but nothing is
	// answered there, DHCPv4, DHCPv6 or router advertisements, until the
	// entry is removed.
	Suspended map[string]Suspension `json:"suspended,omitempty"`
}

// Suspension is why and since when an interface is not served.
type Suspension struct {
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
}

// Network is one IPv4 served network on one interface.
type Network struct {
	// Iface is the interface the network is served on, e.g. "vlan100".
	Iface string `json:"iface"`
	// Gateway is the router's address on Iface, e.g. 10.0.0.1; it is the
	// router option and the server identifier.
	Gateway netip.Addr `json:"gateway"`
	// Prefix is the network, e.g. 10.0.0.0/24.
	Prefix netip.Prefix `json:"network"`
	// PoolStart and PoolEnd bound the dynamic pool, e.g. 10.0.0.100 and
	// 10.0.0.200. Unset: every host address except the gateway.
	PoolStart netip.Addr `json:"pool_start,omitzero"`
	PoolEnd   netip.Addr `json:"pool_end,omitzero"`
	// LeaseTime is the IPv4 lease time; default one hour.
	LeaseTime time.Duration `json:"lease_time,omitempty"`
	// Label is the operator's comment on the subnet block.
	Label string `json:"label,omitempty"`
}

// Network6 is one IPv6 served network (DHCPv6 and router advertisements).
type Network6 struct {
	// Iface is the interface, e.g. "vlan100".
	Iface string `json:"iface"`
	// Gateway is the router's global address on Iface, e.g. 2001:db8:1::1.
	Gateway netip.Addr `json:"gateway6"`
	// Prefix is the on-link network, e.g. 2001:db8:1::/64.
	Prefix netip.Prefix `json:"network6"`
	// PoolStart and PoolEnd bound the IA_NA pool; unset derives it (for a
	// /64: ::1000 to ::ffff).
	PoolStart netip.Addr `json:"pool_start,omitzero"`
	PoolEnd   netip.Addr `json:"pool_end,omitzero"`
}

// Lifetimes6 are DHCPv6 lifetimes for addresses and delegated prefixes.
type Lifetimes6 struct {
	// Valid lifetime, at least 120 s; default 4000 s.
	Valid time.Duration `json:"valid,omitempty"`
	// Preferred lifetime, at most Valid; default half of Valid.
	Preferred time.Duration `json:"preferred,omitempty"`
}

// PD is the router-wide delegation pool and its per-interface slices.
type PD struct {
	// Pool is the router-wide delegation pool (pd_pool), e.g. 2001:db8:a000::/36.
	Pool netip.Prefix `json:"pool,omitzero"`
	// Len is the delegated prefix length (pd_len); default 64.
	Len int `json:"prefix_len,omitempty"`
	// Reserve is how many prefixes at the start of the pool are kept for
	// prefixes pinned to single clients (pd_reserve).
	Reserve int `json:"reserved_for_pinned,omitempty"`
	// Slices maps an interface to its slice of the pool (POST /pd).
	Slices map[string]Slice `json:"per_vlan,omitempty"`
	// Pinned are prefixes pinned to single clients (POST /pd/assign).
	Pinned []Pinned `json:"pinned,omitempty"`
}

// Slice is an interface's range of the delegation pool, in prefix indexes.
type Slice struct {
	// Index of the first prefix of the slice within the pool, e.g. 256.
	Index int `json:"index"`
	// Size is how many prefixes the slice holds, a power of two, e.g. 256.
	Size int `json:"size"`
}

// Pinned pins one delegated prefix to one client, by MAC.
type Pinned struct {
	MAC      string       `json:"mac"`
	Hostname string       `json:"hostname,omitempty"`
	Prefix   netip.Prefix `json:"prefix6"`
}

// DNS holds the global resolvers and per-interface overrides.
type DNS struct {
	// V4 and V6 are the global resolvers, e.g. 9.9.9.9 and 2620:fe::fe.
	V4 []netip.Addr `json:"ipv4,omitempty"`
	V6 []netip.Addr `json:"ipv6,omitempty"`
	// Domain is the domain name handed out, e.g. "isp.example".
	Domain string `json:"domain,omitempty"`
	// PerIface overrides the global resolvers on one interface.
	PerIface map[string]DNSOverride `json:"per_vlan,omitempty"`
}

// DNSOverride replaces the global resolvers of one family on one interface;
// an empty list inherits the global one.
type DNSOverride struct {
	V4 []netip.Addr `json:"ipv4,omitempty"`
	V6 []netip.Addr `json:"ipv6,omitempty"`
}

// Option82 configures relay agent information handling.
type Option82 struct {
	// Enabled turns on the (circuit-id, remote-id) lookup and recording of
	// the fields with the lease. The option is echoed either way, as RFC 3046
	// requires of a server that understands it.
	Enabled bool `json:"enable"`
}

// Client is a MAC-based client (the legacy reservation).
type Client struct {
	// MAC in any common form; stored upper-case with colons.
	MAC string `json:"mac"`
	// IP is the fixed IPv4 address, e.g. 10.0.0.50.
	IP netip.Addr `json:"ip,omitzero"`
	// IPv6 is an optional fixed IPv6 address for IA_NA.
	IPv6 netip.Addr `json:"ipv6,omitzero"`
	// Hostname, max 63 characters; default client-<mac without colons>.
	Hostname string `json:"hostname,omitempty"`
	// Prefix6 is a delegated prefix pinned to the client (from the
	// reserved band of the PD pool); the engine serves it as PD.Pinned.
	Prefix6 netip.Prefix `json:"prefix6,omitzero"`
}

// Service is a fibre subscriber, recognised by the relay agent information
// the OLT inserts (see package opt82 for the circuit-id format).
type Service struct {
	// ID is the service id, e.g. "svc_0a1b2c3d".
	ID string `json:"id"`
	// OLT is the access-node identifier the OLT puts in the circuit-id;
	// empty matches any OLT.
	OLT string `json:"olt,omitempty"`
	// PON is frame/slot/port, e.g. "0/1/0".
	PON string `json:"pon"`
	// ONTID is the ONT id on that port.
	ONTID int `json:"ont_id"`
	// SN is the ONT serial; it matches a remote-id equal to it.
	SN string `json:"sn,omitempty"`
	// IPv4 is the fixed address handed to the service's CPE.
	IPv4 netip.Addr `json:"ipv4"`
	// Hostname is sent in option 12; default the service id.
	Hostname string `json:"hostname,omitempty"`
}

// RA tunes router advertisements.
type RA struct {
	// Interval between unsolicited advertisements; default 200 s.
	Interval time.Duration `json:"interval,omitempty"`
	// RouterLifetime advertised; default 1800 s.
	RouterLifetime time.Duration `json:"router_lifetime,omitempty"`
	// SLAAC sets the autonomous flag on the prefix so hosts may also form
	// their own addresses; off by default because the router binds addresses
	// to MACs for anti-spoofing.
	SLAAC bool `json:"slaac,omitempty"`
	// MTU is announced in the RA's MTU option (RFC 4861 4.6.4) so hosts
	// size their packets for the access link (e.g. 1492 behind PPPoE-sized
	// links); 0 omits the option. At least 1280, IPv6's minimum.
	MTU int `json:"mtu,omitempty"`
}

// Timers tunes housekeeping; zero means default.
type Timers struct {
	// OfferHold is how long an offered address is held for the client.
	OfferHold time.Duration `json:"offer_hold,omitempty"`
	// Quarantine is how long a declined address is withheld.
	Quarantine time.Duration `json:"quarantine,omitempty"`
	// Reclaim is how often expired leases are reclaimed.
	Reclaim time.Duration `json:"reclaim,omitempty"`
	// CacheThreshold is lease caching, as ISC dhcpd's dhcp-cache-threshold
	// and Kea's cache-threshold: a client renewing its own lease within
	// this fraction of the lease time since the lease was last written is
	// answered from the durable lease, with the time it has left, and no
	// write. Subscriber CPEs that restart or re-request in bursts (a PON
	// port coming back) then cost no store write at all. 0 takes the
	// default 0.25 (dhcpd's); a negative value writes every renewal.
	CacheThreshold float64 `json:"cache_threshold,omitempty"`
}

// WithDefaults returns a copy with every unset default filled in.
func (c Config) WithDefaults() Config {
	out := c
	out.Networks = append([]Network(nil), c.Networks...)
	for i := range out.Networks {
		if out.Networks[i].LeaseTime == 0 {
			out.Networks[i].LeaseTime = DefaultLeaseTime4
		}
	}
	if out.Lifetimes6.Valid == 0 {
		out.Lifetimes6.Valid = DefaultValid6
	}
	if out.Lifetimes6.Preferred == 0 {
		out.Lifetimes6.Preferred = out.Lifetimes6.Valid / 2
	}
	if out.PD.Len == 0 {
		out.PD.Len = DefaultPDLen
	}
	if out.RA.Interval == 0 {
		out.RA.Interval = DefaultRAInterval
	}
	if out.RA.RouterLifetime == 0 {
		out.RA.RouterLifetime = DefaultRouterLifetime
	}
	if out.Timers.OfferHold == 0 {
		out.Timers.OfferHold = defaultOfferHold
	}
	if out.Timers.Quarantine == 0 {
		out.Timers.Quarantine = DefaultQuarantine
	}
	if out.Timers.Reclaim == 0 {
		out.Timers.Reclaim = defaultReclaimInterval
	}
	if out.Timers.CacheThreshold == 0 {
		out.Timers.CacheThreshold = defaultCacheThreshold
	}
	return out
}

// NormalizeMAC returns the stored form of a MAC, upper-case with colons
// (shared/mac: the subscribers' clients key by the same form).
func NormalizeMAC(s string) (string, error) { return mac.Normalize(s) }

// Validate checks the whole configuration (after defaults) and returns every
// problem found, joined, so an operator sees all of them at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	ifaces4 := map[string]bool{}
	for i, n := range c.Networks {
		switch {
		case n.Iface == "" || len(n.Iface) > 15:
			bad("networks[%d]: invalid iface %q", i, n.Iface)
		case ifaces4[n.Iface]:
			bad("networks[%d]: iface %s served twice", i, n.Iface)
		}
		ifaces4[n.Iface] = true
		if !n.Prefix.IsValid() || !n.Prefix.Addr().Is4() || n.Prefix.Bits() > 30 {
			bad("networks[%d]: invalid IPv4 network %v", i, n.Prefix)
			continue
		}
		if n.Prefix.Masked() != n.Prefix {
			bad("networks[%d]: %v is not a network address", i, n.Prefix)
		}
		if !n.Prefix.Contains(n.Gateway) {
			bad("networks[%d]: gateway %v outside %v", i, n.Gateway, n.Prefix)
		}
		if n.PoolStart.IsValid() != n.PoolEnd.IsValid() {
			bad("networks[%d]: pool needs both start and end", i)
		} else if n.PoolStart.IsValid() {
			if !n.Prefix.Contains(n.PoolStart) || !n.Prefix.Contains(n.PoolEnd) || n.PoolEnd.Less(n.PoolStart) {
				bad("networks[%d]: pool %v-%v not an ordered range inside %v", i, n.PoolStart, n.PoolEnd, n.Prefix)
			}
		}
		if n.LeaseTime < time.Minute {
			bad("networks[%d]: lease time %v below one minute", i, n.LeaseTime)
		}
	}
	for i, a := range c.Networks {
		for _, b := range c.Networks[i+1:] {
			if a.Prefix.IsValid() && b.Prefix.IsValid() && a.Prefix.Overlaps(b.Prefix) {
				bad("networks %v and %v overlap", a.Prefix, b.Prefix)
			}
		}
	}

	ifaces6 := map[string]bool{}
	for i, n := range c.Networks6 {
		if n.Iface == "" || len(n.Iface) > 15 || ifaces6[n.Iface] {
			bad("networks6[%d]: invalid or repeated iface %q", i, n.Iface)
		}
		ifaces6[n.Iface] = true
		if !n.Prefix.IsValid() || !n.Prefix.Addr().Is6() || n.Prefix.Addr().Is4In6() || n.Prefix.Bits() > 120 {
			bad("networks6[%d]: invalid IPv6 network %v", i, n.Prefix)
			continue
		}
		if !n.Prefix.Contains(n.Gateway) {
			bad("networks6[%d]: gateway %v outside %v", i, n.Gateway, n.Prefix)
		}
		if _, _, err := n.Pool(); err != nil {
			bad("networks6[%d]: %v", i, err)
		}
	}

	l := c.Lifetimes6
	if l.Valid < MinValid6 {
		bad("lifetimes6: valid %v below %v", l.Valid, MinValid6)
	}
	if l.Preferred <= 0 || l.Preferred > l.Valid {
		bad("lifetimes6: preferred %v must be positive and at most valid %v", l.Preferred, l.Valid)
	}

	errs = append(errs, c.validatePD(ifaces6)...)

	for _, a := range append(append([]netip.Addr(nil), c.DNS.V4...), c.DNS.V6...) {
		if !a.IsValid() {
			bad("dns: invalid resolver")
		}
	}
	for ifc := range c.DNS.PerIface {
		if !ifaces4[ifc] && !ifaces6[ifc] {
			bad("dns: override for %s, which is not served", ifc)
		}
	}
	for ifc := range c.Suspended {
		if !ifaces4[ifc] && !ifaces6[ifc] {
			bad("suspended: %s, which is not served", ifc)
		}
	}
	if len(c.DNS.Domain) > 253 {
		bad("dns: domain too long")
	}

	macs := map[string]bool{}
	ips := map[netip.Addr]string{}
	for i, cl := range c.Clients {
		m, err := NormalizeMAC(cl.MAC)
		if err != nil {
			bad("clients[%d]: %v", i, err)
			continue
		}
		if macs[m] {
			bad("clients[%d]: MAC %s in use", i, m)
		}
		macs[m] = true
		if !cl.IP.Is4() || c.network4For(cl.IP) == nil {
			bad("clients[%d]: IPv4 %v outside served networks", i, cl.IP)
		} else if n := c.network4For(cl.IP); cl.IP == n.Gateway || cl.IP == n.Prefix.Addr() || cl.IP == lastAddr(n.Prefix) {
			bad("clients[%d]: %v is the network, gateway or broadcast address", i, cl.IP)
		}
		if prev, dup := ips[cl.IP]; dup {
			bad("clients[%d]: IP %v in use by %s", i, cl.IP, prev)
		}
		ips[cl.IP] = m
		if cl.IPv6.IsValid() {
			if c.network6For(cl.IPv6) == nil {
				bad("clients[%d]: IPv6 %v outside served networks", i, cl.IPv6)
			}
			if prev, dup := ips[cl.IPv6]; dup {
				bad("clients[%d]: IPv6 %v in use by %s", i, cl.IPv6, prev)
			}
			ips[cl.IPv6] = m
		}
		if len(cl.Hostname) > maxHostname || !validHostname(cl.Hostname) {
			bad("clients[%d]: invalid hostname %q", i, cl.Hostname)
		}
	}
	keys := map[string]bool{}
	for i, s := range c.Services {
		if _, _, _, err := ParsePON(s.PON); err != nil {
			bad("services[%d]: %v", i, err)
		}
		k := fmt.Sprintf("%s|%s|%d", s.OLT, s.PON, s.ONTID)
		if keys[k] {
			bad("services[%d]: port %s ONT %d already belongs to a service", i, s.PON, s.ONTID)
		}
		keys[k] = true
		if !s.IPv4.Is4() || c.network4For(s.IPv4) == nil {
			bad("services[%d]: IPv4 %v outside served networks", i, s.IPv4)
		}
		if prev, dup := ips[s.IPv4]; dup {
			bad("services[%d]: IP %v in use by %s", i, s.IPv4, prev)
		}
		ips[s.IPv4] = s.ID
	}
	if c.RA.Interval < 3*time.Second || c.RA.Interval > 1800*time.Second {
		bad("ra: interval %v outside 3s-1800s", c.RA.Interval)
	}
	if c.RA.RouterLifetime < 0 || c.RA.RouterLifetime > 9000*time.Second {
		bad("ra: router lifetime %v outside 0-9000s", c.RA.RouterLifetime)
	}
	if c.RA.MTU != 0 && (c.RA.MTU < 1280 || c.RA.MTU > 65535) {
		bad("ra: mtu %d outside 1280-65535 (0 omits the option)", c.RA.MTU)
	}
	if c.Timers.CacheThreshold >= 1 {
		bad("timers: cache threshold %v must be below 1 (a fraction of the lease time)", c.Timers.CacheThreshold)
	}
	return errors.Join(errs...)
}

func (c Config) validatePD(ifaces6 map[string]bool) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	p := c.PD
	if !p.Pool.IsValid() {
		if len(p.Slices) > 0 || len(p.Pinned) > 0 {
			bad("pd: slices or pinned prefixes without a pool")
		}
		return errs
	}
	if !p.Pool.Addr().Is6() || p.Pool.Masked() != p.Pool {
		bad("pd: invalid pool %v", p.Pool)
		return errs
	}
	if p.Len < p.Pool.Bits() || p.Len > 64 {
		bad("pd: prefix length %d outside %d-64", p.Len, p.Pool.Bits())
		return errs
	}
	total := uint64(1) << min(p.Len-p.Pool.Bits(), 62)
	if p.Reserve < 0 || uint64(p.Reserve) > total {
		bad("pd: reserve %d outside the pool", p.Reserve)
	}
	type span struct {
		iface    string
		from, to uint64
	}
	var spans []span
	for ifc, s := range p.Slices {
		if !ifaces6[ifc] {
			bad("pd: slice for %s, which has no served IPv6 network", ifc)
		}
		if s.Size <= 0 || s.Size&(s.Size-1) != 0 || s.Size > maxPDSlice {
			bad("pd: slice size %d for %s is not a power of two up to %d", s.Size, ifc, maxPDSlice)
			continue
		}
		from, to := uint64(s.Index), uint64(s.Index)+uint64(s.Size)
		if s.Index < p.Reserve || to > total {
			bad("pd: slice of %s (%d+%d) outside the usable pool", ifc, s.Index, s.Size)
		}
		for _, o := range spans {
			if from < o.to && o.from < to {
				bad("pd: slices of %s and %s overlap", ifc, o.iface)
			}
		}
		spans = append(spans, span{ifc, from, to})
	}
	seen := map[string]bool{}
	for i, pn := range p.Pinned {
		m, err := NormalizeMAC(pn.MAC)
		if err != nil {
			bad("pd.pinned[%d]: %v", i, err)
		}
		if pn.Prefix.Bits() != p.Len || !p.Pool.Contains(pn.Prefix.Addr()) || pn.Prefix.Masked() != pn.Prefix {
			bad("pd.pinned[%d]: %v is not a /%d inside %v", i, pn.Prefix, p.Len, p.Pool)
			continue
		}
		if idx := PrefixIndex(p.Pool, p.Len, pn.Prefix); idx >= uint64(p.Reserve) {
			bad("pd.pinned[%d]: %v outside the reserved band", i, pn.Prefix)
		}
		if seen[m] || seen[pn.Prefix.String()] {
			bad("pd.pinned[%d]: MAC or prefix pinned twice", i)
		}
		seen[m], seen[pn.Prefix.String()] = true, true
	}
	return errs
}

func (c Config) network4For(a netip.Addr) *Network {
	for i := range c.Networks {
		if c.Networks[i].Prefix.Contains(a) {
			return &c.Networks[i]
		}
	}
	return nil
}

func (c Config) network6For(a netip.Addr) *Network6 {
	for i := range c.Networks6 {
		if c.Networks6[i].Prefix.Contains(a) {
			return &c.Networks6[i]
		}
	}
	return nil
}

func validHostname(h string) bool {
	for _, r := range h {
		if !(r == '.' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// DefaultHostname is the spec's default hostname for a MAC-based client.
func DefaultHostname(mac string) string {
	return "client-" + strings.ToLower(strings.ReplaceAll(mac, ":", ""))
}

// Pool returns the IA_NA pool bounds, derived when unset: for a /64 the
// spec's ::1000 to ::ffff; for a longer prefix the upper half of the network.
func (n Network6) Pool() (netip.Addr, netip.Addr, error) {
	if n.PoolStart.IsValid() || n.PoolEnd.IsValid() {
		if !n.Prefix.Contains(n.PoolStart) || !n.Prefix.Contains(n.PoolEnd) || n.PoolEnd.Less(n.PoolStart) {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("pool %v-%v not an ordered range inside %v", n.PoolStart, n.PoolEnd, n.Prefix)
		}
		if Span6(n.PoolStart, n.PoolEnd) > maxPoolSize6 {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("pool %v-%v larger than %d addresses", n.PoolStart, n.PoolEnd, maxPoolSize6)
		}
		return n.PoolStart, n.PoolEnd, nil
	}
	base := n.Prefix.Masked().Addr().As16()
	if n.Prefix.Bits() <= 112 {
		s, e := base, base
		s[14], s[15] = 0x10, 0x00
		e[14], e[15] = 0xff, 0xff
		return netip.AddrFrom16(s), netip.AddrFrom16(e), nil
	}
	host := 128 - n.Prefix.Bits()
	if host < 2 {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("no pool derivable from %v", n.Prefix)
	}
	last := lastAddr(n.Prefix)
	size := uint64(1) << (host - 1)
	first := last
	for range size - 1 {
		first = first.Prev()
	}
	return first, last.Prev(), nil
}

// Span6 is how many addresses lie in [a, b] (b >= a), saturating at 2^63.
func Span6(a, b netip.Addr) uint64 {
	x, y := a.As16(), b.As16()
	for i := 0; i < 8; i++ {
		if x[i] != y[i] {
			return 1 << 63
		}
	}
	var lo, hi uint64
	for i := 8; i < 16; i++ {
		lo, hi = lo<<8|uint64(x[i]), hi<<8|uint64(y[i])
	}
	if hi-lo >= 1<<63 {
		return 1 << 63
	}
	return hi - lo + 1
}

// PrefixIndex is the position of p in pool when cut into /plen prefixes.
func PrefixIndex(pool netip.Prefix, plen int, p netip.Prefix) uint64 {
	a, b := pool.Addr().As16(), p.Addr().As16()
	var x, y uint64
	for i := 0; i < 8; i++ {
		x, y = x<<8|uint64(a[i]), y<<8|uint64(b[i])
	}
	return (y - x) >> (64 - plen)
}

// PrefixAt is the inverse of PrefixIndex.
func PrefixAt(pool netip.Prefix, plen int, idx uint64) netip.Prefix {
	a := pool.Addr().As16()
	var x uint64
	for i := 0; i < 8; i++ {
		x = x<<8 | uint64(a[i])
	}
	x += idx << (64 - plen)
	var out [16]byte
	for i := 7; i >= 0; i-- {
		out[i] = byte(x)
		x >>= 8
	}
	return netip.PrefixFrom(netip.AddrFrom16(out), plen)
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().AsSlice()
	host := len(a)*8 - p.Bits()
	for i := len(a) - 1; i >= 0 && host > 0; i-- {
		n := min(host, 8)
		a[i] |= byte(1<<n - 1)
		host -= n
	}
	out, _ := netip.AddrFromSlice(a)
	return out
}

// LastAddr is the broadcast address of an IPv4 network (the last address).
func LastAddr(p netip.Prefix) netip.Addr { return lastAddr(p) }

// ParsePON parses frame/slot/port, e.g. "0/1/0".
func ParsePON(s string) (frame, slot, port int, err error) {
	if n, e := fmt.Sscanf(s, "%d/%d/%d", &frame, &slot, &port); e != nil || n != 3 || fmt.Sprintf("%d/%d/%d", frame, slot, port) != s {
		return 0, 0, 0, fmt.Errorf("invalid PON %q, want frame/slot/port", s)
	}
	return frame, slot, port, nil
}

// WithoutSlices returns the delegation settings with no interface slices,
// for a configuration that stops serving IPv6.
func (p PD) WithoutSlices() PD { p.Slices = nil; return p }
