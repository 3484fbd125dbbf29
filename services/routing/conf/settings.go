// Package conf is the routing settings as stored in etcd, the rules they
// must satisfy, and their rendering into BIRD's configuration. It is pure:
// no daemon, no store, no kernel.
package conf

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Settings is the routing service's one document
// (/router/routing/settings).
type Settings struct {
	Enabled      bool     `json:"enabled"`
	ASN          int64    `json:"asn"`
	RouterID     string   `json:"router_id"`
	RPKI         bool     `json:"rpki"`
	Announce     []string `json:"announce"`
	Blackhole    []string `json:"blackhole"`
	Peers        []Peer   `json:"peers"`
	OSPF         OSPF     `json:"ospf"`
	KernelMetric int64    `json:"kernel_metric"`
}

// Peer is one BGP neighbour.
type Peer struct {
	Name               string `json:"name"`
	IP                 string `json:"ip"`
	ASN                int64  `json:"asn"`
	Type               string `json:"type"`   // upstream, ibgp
	Routes             string `json:"routes"` // default, full (upstreams)
	Role               string `json:"role"`   // primary, backup (upstreams)
	Enabled            bool   `json:"enabled"`
	Description        string `json:"description"`
	Password           string `json:"password_sealed,omitempty"` // sealed (see Sealer); never answered
	BlackholeCommunity string `json:"blackhole_community"`
	MaxPrefix          int64  `json:"max_prefix"`
	Multihop           int64  `json:"multihop"`
	BFD                bool   `json:"bfd"`
}

// OSPF is the OSPF block.
type OSPF struct {
	Enabled          bool    `json:"enabled"`
	Area             string  `json:"area"`
	OriginateDefault bool    `json:"originate_default"`
	AcceptDefault    bool    `json:"accept_default"`
	Interfaces       []Iface `json:"interfaces"`
}

// Iface is one OSPF interface.
type Iface struct {
	Name    string `json:"name"`
	Cost    int64  `json:"cost"`
	Passive bool   `json:"passive"`
}

// DefaultKernelMetric is the metric of the routes BIRD installs.
const DefaultKernelMetric = 32

// Default max_prefix values (Document 1, Limits).
const (
	MaxPrefixDefault  = 16
	MaxPrefixFullIPv4 = 1_500_000
	MaxPrefixFullIPv6 = 400_000
)

// Clone is a deep copy.
func (s Settings) Clone() Settings {
	c := s
	c.Announce = slices.Clone(s.Announce)
	c.Blackhole = slices.Clone(s.Blackhole)
	c.Peers = slices.Clone(s.Peers)
	c.OSPF.Interfaces = slices.Clone(s.OSPF.Interfaces)
	return c
}

// Normal fills defaults a stored document may lack.
func (s *Settings) Normal() {
	if s.KernelMetric == 0 {
		s.KernelMetric = DefaultKernelMetric
	}
	if s.OSPF.Area == "" {
		s.OSPF.Area = "0.0.0.0"
	}
}

// Active says whether BGP or OSPF is on: then changes wait for confirm.
func (s *Settings) Active() bool { return s.Enabled || s.OSPF.Enabled }

// PeerIndex is the index of the peer of that name, or -1.
func (s *Settings) PeerIndex(name string) int {
	return slices.IndexFunc(s.Peers, func(p Peer) bool { return p.Name == name })
}

// Problems lists what is wrong in the settings; a change leaving one is
// refused.
func (s *Settings) Problems() []string {
	var out []string
	add := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
	if s.Enabled {
		if s.ASN == 0 {
			add("BGP is on but asn is not set")
		}
		if s.RouterID == "" {
			add("BGP is on but router_id is not set")
		}
		if len(s.Peers) == 0 {
			add("BGP is on but no peer is configured")
		}
	}
	if s.OSPF.Enabled {
		if s.RouterID == "" {
			add("OSPF is on but router_id is not set")
		}
		if len(s.OSPF.Interfaces) == 0 {
			add("OSPF is on but no interface is configured")
		}
	}
	seenIP := map[string]string{}
	for _, p := range s.Peers {
		if o, dup := seenIP[p.IP]; dup {
			add("peers %s and %s have the same address %s", o, p.Name, p.IP)
		}
		seenIP[p.IP] = p.Name
		switch {
		case p.Type == "ibgp" && s.ASN != 0 && p.ASN != s.ASN:
			add("peer %s is ibgp but its asn %d is not ours (%d)", p.Name, p.ASN, s.ASN)
		case p.Type == "upstream" && s.ASN != 0 && p.ASN == s.ASN:
			add("peer %s is an upstream with our own asn %d (make it ibgp)", p.Name, p.ASN)
		}
	}
	return out
}

// EffectiveMaxPrefix is the peer's max_prefix, or its kind's default.
func EffectiveMaxPrefix(p *Peer) int64 {
	if p.MaxPrefix > 0 {
		return p.MaxPrefix
	}
	return DefaultMaxPrefix(p)
}

// DefaultMaxPrefix is the max_prefix a peer gets when none is set.
func DefaultMaxPrefix(p *Peer) int64 {
	if p.Type == "upstream" && p.Routes == "full" {
		if a, err := netip.ParseAddr(p.IP); err == nil && a.Is6() {
			return MaxPrefixFullIPv6
		}
		return MaxPrefixFullIPv4
	}
	if p.Type == "ibgp" {
		return MaxPrefixFullIPv4
	}
	return MaxPrefixDefault
}

// InputError is a request field at fault (a 400 naming it).
type InputError struct{ Field, Message string }

func (e *InputError) Error() string { return e.Message }

func bad(field, f string, a ...any) error { return &InputError{field, fmt.Sprintf(f, a...)} }

// Public reports whether a is a public unicast address (not private,
// loopback, link-local, multicast, documentation, CGNAT, reserved).
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() {
		return false
	}
	for _, b := range bogons {
		if b.Contains(a) {
			return false
		}
	}
	return true
}

// Bogons are the prefixes no full-table upstream may send (and no
// announcement or blackhole may name).
var BogonsV4 = []string{"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
	"224.0.0.0/4", "240.0.0.0/4"}

// BogonsV6 likewise.
var BogonsV6 = []string{"::/8", "0100::/64", "2001:2::/48", "2001:10::/28", "2001:db8::/32", "2002::/16",
	"3ffe::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8"}

var bogons = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range append(slices.Clone(BogonsV4), BogonsV6...) {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// CheckAnnounce checks an announced prefix: public IPv4 /8-/24 or IPv6
// /16-/48, no host bits. It returns the canonical form.
func CheckAnnounce(s string) (string, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return "", bad("prefix", "invalid prefix %q: want a CIDR block", s)
	}
	if p.Masked() != p {
		return "", bad("prefix", "prefix %s has host bits set: did you mean %s?", s, p.Masked())
	}
	lo, hi := 8, 24
	if p.Addr().Is6() {
		lo, hi = 16, 48
	}
	if p.Bits() < lo || p.Bits() > hi {
		return "", bad("prefix", "prefix %s: announced IPv%s blocks are /%d to /%d", s, map[bool]string{true: "6", false: "4"}[p.Addr().Is6()], lo, hi)
	}
	if !Public(p.Addr()) {
		return "", bad("prefix", "prefix %s is not public address space", s)
	}
	return p.String(), nil
}

// CheckBlackhole checks a blackholed address: one public address.
func CheckBlackhole(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return "", bad("ip", "invalid ip %q: want one address", s)
	}
	a = a.Unmap()
	if !Public(a) {
		return "", bad("ip", "ip %s is not a public address", s)
	}
	return a.String(), nil
}

// CheckCommunity checks as:n with both halves 16-bit.
func CheckCommunity(s string) error {
	a, n, ok := strings.Cut(s, ":")
	x, err1 := strconv.ParseUint(a, 10, 16)
	y, err2 := strconv.ParseUint(n, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return bad("blackhole_community", "invalid blackhole_community %q: want as:n, both 0-65535", s)
	}
	_, _ = x, y
	return nil
}

// ParseArea turns a number or dotted quad into a dotted quad.
func ParseArea(s string) (string, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return "", bad("area", "invalid area %q: want a number or a dotted quad", s)
	}
	return a.String(), nil
}
