package conf

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode"

	"routerd.dev/proto/api"
)

// NotFoundError is a change naming something that is not there (404).
type NotFoundError struct{ Message string }

func (e *NotFoundError) Error() string { return e.Message }

// Set applies POST /bgp/set.
func (s *Settings) Set(r *api.BGPSet) (string, error) {
	if r.ASN == nil && r.RouterID == nil && r.Enabled == nil && r.RPKI == nil {
		return "", bad("asn", "nothing to set: send any of asn, router_id, enabled, rpki")
	}
	if r.ASN != nil {
		s.ASN = *r.ASN
	}
	if r.RouterID != nil {
		a, _ := netip.ParseAddr(*r.RouterID)
		if !a.IsValid() || a.IsUnspecified() {
			return "", bad("router_id", "invalid router_id %q: want a non-zero IPv4 address", *r.RouterID)
		}
		s.RouterID = a.String()
	}
	if r.Enabled != nil {
		s.Enabled = *r.Enabled
	}
	if r.RPKI != nil {
		s.RPKI = *r.RPKI
	}
	return "BGP settings changed", nil
}

// PeerAdd applies POST /bgp/peer-add: a new peer, or the named one changed
// (fields not sent stay). seal encrypts a password for storage.
func (s *Settings) PeerAdd(r *api.BGPPeerAdd, seal func(peer, clear string) (string, error)) (string, error) {
	a, err := netip.ParseAddr(r.IP)
	if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
		return "", bad("ip", "invalid ip %q: want a unicast IPv4 or IPv6 address", r.IP)
	}
	i := s.PeerIndex(r.Name)
	msg := "Peer changed"
	var p Peer
	if i < 0 {
		msg = "Peer added"
		p = Peer{Name: r.Name, Type: "upstream", Routes: "default", Role: "primary", Enabled: true}
	} else {
		p = s.Peers[i]
	}
	p.IP = a.Unmap().String()
	p.ASN = r.ASN
	if r.Type != nil {
		p.Type = *r.Type
	}
	if r.Routes != nil {
		if p.Type == "ibgp" {
			return "", bad("routes", "routes applies to upstreams only")
		}
		p.Routes = *r.Routes
	}
	if r.Role != nil {
		if p.Type == "ibgp" {
			return "", bad("role", "role applies to upstreams only")
		}
		p.Role = *r.Role
	}
	if p.Type == "ibgp" {
		p.Routes, p.Role = "", ""
	} else {
		if p.Routes == "" {
			p.Routes = "default"
		}
		if p.Role == "" {
			p.Role = "primary"
		}
	}
	if r.Password != nil {
		if strings.ContainsAny(*r.Password, "\"\\") || strings.IndexFunc(*r.Password, unicode.IsControl) >= 0 {
			return "", bad("password", "password may not contain a double quote, a backslash or control characters")
		}
		if sealed, err := seal(p.Name, *r.Password); err != nil {
			return "", fmt.Errorf("sealing the password: %w", err)
		} else {
			p.Password = sealed
		}
	}
	if r.BlackholeCommunity != nil {
		switch c := *r.BlackholeCommunity; c {
		case "none", "-":
			p.BlackholeCommunity = ""
		default:
			if err := CheckCommunity(c); err != nil {
				return "", err
			}
			p.BlackholeCommunity = c
		}
	}
	// 0 means the default of the peer's kind, so that a peer turned from
	// routes: default to full gets the full table's limit, not 16.
	if r.MaxPrefix != nil {
		p.MaxPrefix = *r.MaxPrefix
	}
	if r.Multihop != nil {
		p.Multihop = *r.Multihop
	}
	if r.BFD != nil {
		p.BFD = *r.BFD
	}
	if r.Enabled != nil {
		p.Enabled = *r.Enabled
	}
	if r.Description != nil {
		p.Description = *r.Description
	}
	if i < 0 {
		s.Peers = append(s.Peers, p)
	} else {
		s.Peers[i] = p
	}
	return msg + ": " + p.Name, nil
}

// PeerDel removes a peer.
func (s *Settings) PeerDel(name string) (string, error) {
	i := s.PeerIndex(name)
	if i < 0 {
		return "", &NotFoundError{fmt.Sprintf("no peer named %s", name)}
	}
	s.Peers = slices.Delete(s.Peers, i, i+1)
	return "Peer removed: " + name, nil
}

// PeerEnable enables or disables a peer.
func (s *Settings) PeerEnable(name string, on bool) (string, error) {
	i := s.PeerIndex(name)
	if i < 0 {
		return "", &NotFoundError{fmt.Sprintf("no peer named %s", name)}
	}
	s.Peers[i].Enabled = on
	if on {
		return "Peer enabled: " + name, nil
	}
	return "Peer disabled: " + name, nil
}

// AnnounceAdd adds an announced prefix.
func (s *Settings) AnnounceAdd(prefix string) (string, error) {
	p, err := CheckAnnounce(prefix)
	if err != nil {
		return "", err
	}
	if slices.Contains(s.Announce, p) {
		return "", bad("prefix", "prefix %s is already announced", p)
	}
	s.Announce = append(s.Announce, p)
	return "Prefix announced: " + p, nil
}

// AnnounceDel removes an announced prefix.
func (s *Settings) AnnounceDel(prefix string) (string, error) {
	pp, err := netip.ParsePrefix(prefix)
	if err != nil {
		return "", bad("prefix", "invalid prefix %q", prefix)
	}
	i := slices.Index(s.Announce, pp.String())
	if i < 0 {
		return "", &NotFoundError{fmt.Sprintf("prefix %s is not announced", pp)}
	}
	s.Announce = slices.Delete(s.Announce, i, i+1)
	return "Prefix no longer announced: " + pp.String(), nil
}

// BlackholeAdd adds a blackholed address.
func (s *Settings) BlackholeAdd(ip string) (string, error) {
	a, err := CheckBlackhole(ip)
	if err != nil {
		return "", err
	}
	if slices.Contains(s.Blackhole, a) {
		return "", bad("ip", "%s is already blackholed", a)
	}
	s.Blackhole = append(s.Blackhole, a)
	return "Blackholed: " + a, nil
}

// BlackholeDel removes a blackholed address.
func (s *Settings) BlackholeDel(ip string) (string, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "", bad("ip", "invalid ip %q", ip)
	}
	i := slices.Index(s.Blackhole, a.Unmap().String())
	if i < 0 {
		return "", &NotFoundError{fmt.Sprintf("%s is not blackholed", a)}
	}
	s.Blackhole = slices.Delete(s.Blackhole, i, i+1)
	return "Blackhole removed: " + a.String(), nil
}

// OSPFSet applies POST /bgp/ospf-set.
func (s *Settings) OSPFSet(r *api.OSPFSet) (string, error) {
	if r.Enabled == nil && r.Area == nil && r.OriginateDefault == nil && r.AcceptDefault == nil {
		return "", bad("enabled", "nothing to set: send any of enabled, area, originate_default, accept_default")
	}
	if r.Area != nil {
		a, err := ParseArea(*r.Area)
		if err != nil {
			return "", err
		}
		s.OSPF.Area = a
	}
	if r.Enabled != nil {
		s.OSPF.Enabled = *r.Enabled
	}
	if r.OriginateDefault != nil {
		s.OSPF.OriginateDefault = *r.OriginateDefault
	}
	if r.AcceptDefault != nil {
		s.OSPF.AcceptDefault = *r.AcceptDefault
	}
	return "OSPF settings changed", nil
}

// OSPFIfaceAdd adds or changes an OSPF interface.
func (s *Settings) OSPFIfaceAdd(r *api.OSPFIfaceAdd) (string, error) {
	it := Iface{Name: r.Name, Cost: r.Cost, Passive: r.Passive}
	if it.Cost == 0 {
		it.Cost = 10
	}
	i := slices.IndexFunc(s.OSPF.Interfaces, func(x Iface) bool { return x.Name == r.Name })
	if i >= 0 {
		s.OSPF.Interfaces[i] = it
		return "OSPF interface changed: " + r.Name, nil
	}
	s.OSPF.Interfaces = append(s.OSPF.Interfaces, it)
	return "OSPF interface added: " + r.Name, nil
}

// OSPFIfaceDel removes an OSPF interface.
func (s *Settings) OSPFIfaceDel(name string) (string, error) {
	i := slices.IndexFunc(s.OSPF.Interfaces, func(x Iface) bool { return x.Name == name })
	if i < 0 {
		return "", &NotFoundError{fmt.Sprintf("no OSPF interface %s", name)}
	}
	s.OSPF.Interfaces = slices.Delete(s.OSPF.Interfaces, i, i+1)
	return "OSPF interface removed: " + name, nil
}
