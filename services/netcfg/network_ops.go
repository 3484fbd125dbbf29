package netcfg

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/services/netcfg/link"
	"routerd.dev/shared/apierr"
)

// The immediate /network/vlan-* and /network/ip-* operations: Document 1's
// lock-out rules checked first, then the VLAN and address operations of
// Document 2 (vlan.Book) do the change.

func isDefault(prefix string) bool {
	return prefix == "default" || prefix == "0.0.0.0/0" || prefix == "::/0"
}

// vlanRefusals says what keeps a VLAN from being disabled (or deleted)
// and what the change would affect. 404 when the VLAN is not configured.
func (s *Service) vlanRefusals(ctx context.Context, name string, deleting bool, local string) (refused, impact []string, err error) {
	d, err := s.vlans.Export(ctx)
	if err != nil {
		return nil, nil, err
	}
	var addrs []string
	found := false
	for _, r := range d.VLANs {
		if r.Name == name {
			found = true
			addrs = append(append(addrs, r.IPs...), r.IPs6...)
		}
	}
	if !found {
		return nil, nil, apierr.NotFound("%s is not a configured VLAN", name).With("field", "name")
	}
	kv, err := s.readKernel()
	if err != nil {
		return nil, nil, apierr.Internal(err.Error(), "the kernel's interfaces cannot be read")
	}
	// Interfaces on top: stored VLANs, and live links the kernel has
	// on it (the operator's included).
	top := map[string]bool{}
	for _, r := range d.VLANs {
		if r.Parent == name {
			top[r.Name] = true
		}
	}
	if l, ok := kv.byName[name]; ok {
		for _, o := range kv.links {
			if o.Attrs().ParentIndex == l.Attrs().Index && o.Attrs().Index != l.Attrs().Index {
				top[o.Attrs().Name] = true
			}
		}
		for _, a := range kv.addrs[name] {
			if p, ok := globalAddr(a); ok && !containsS(addrs, p.String()) {
				addrs = append(addrs, p.String())
			}
		}
	}
	for _, n := range sortedSet(top) {
		refused = append(refused, fmt.Sprintf("refused: %s runs on top of %s", n, name))
	}
	defs, err := s.defaults(kv)
	if err != nil {
		return nil, nil, apierr.Internal(err.Error(), "the kernel's routes cannot be read")
	}
	for _, r := range defs {
		if r.Dev == name || top[r.Dev] {
			refused = append(refused, fmt.Sprintf("refused: the default route (%s via %s, %s) goes out through %s", r.To, r.Via, r.Protocol, r.Dev))
		}
	}
	if managed, err := s.routes.Managed(ctx); err == nil {
		for _, r := range managed {
			if !isDefault(r.Prefix) {
				continue
			}
			through := r.Dev == name
			if v, err := netip.ParseAddr(r.Via); err == nil {
				for _, a := range addrs {
					if p, err := netip.ParsePrefix(a); err == nil && p.Masked().Contains(v) {
						through = true
					}
				}
			}
			if through {
				refused = append(refused, fmt.Sprintf("refused: the configured default route via %s goes out through %s", r.Via, name))
			}
		}
	}
	g, err := s.guard(local)
	if err != nil {
		return nil, nil, apierr.Internal(err.Error(), "the kernel's socket table cannot be read")
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a); err == nil {
			if why := g.Protected(p.Addr()); why != "" {
				refused = append(refused, "refused: "+name+" holds "+a+": "+why)
			}
		}
	}
	if s.vlans.Uses != nil {
		for _, why := range s.vlans.Uses.VLANInUse(ctx, name, deleting) {
			refused = append(refused, "refused: "+why)
		}
	}
	if deleting {
		impact = append(impact, "link "+name+" removed")
		if len(addrs) > 0 {
			impact = append(impact, "addresses removed: "+strings.Join(addrs, ", "))
		}
		impact = append(impact, "the DHCP subnets, delegation pool, routes, NAT pool and port forwards of "+name+" are removed; its traffic history is kept")
	} else {
		impact = append(impact, "link "+name+" down")
		if len(addrs) > 0 {
			impact = append(impact, "addresses offline: "+strings.Join(addrs, ", "))
		}
		impact = append(impact, "DHCPv4, DHCPv6 and router advertisements on "+name+" stop; everything else is kept")
	}
	return refused, impact, nil
}

func containsS(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func refusedErr(refused []string) error {
	return apierr.Conflict("%s", strings.Join(refused, "; ")).With("refused", refused)
}

func (s *Service) netVLANCheck(ctx context.Context, in *api.NetVLANCheck) (*api.NetCheckAnswer, error) {
	refused, impact, err := s.vlanRefusals(ctx, in.Name, in.Action == "delete", in.Local)
	if err != nil {
		return nil, err
	}
	return &api.NetCheckAnswer{Name: in.Name, Refused: nonNilS(refused), Impact: nonNilS(impact)}, nil
}

func (s *Service) netVLANAdd(ctx context.Context, in *api.NetVLANAdd) (*api.VLANAddAnswer, error) {
	proto := link.Dot1Q
	if in.Protocol == link.Dot1AD {
		proto = link.Dot1AD
	}
	return s.vlans.Create(ctx, &api.VLANAdd{Parent: in.Parent, VLANID: in.VLANID, Protocol: proto, IP: in.IP, IPv6: in.IPv6, Label: in.Label, Serve: in.Serve})
}

func (s *Service) netVLANDisable(ctx context.Context, in *api.NetVLANChange) (*api.VLANDisableAnswer, error) {
	refused, _, err := s.vlanRefusals(ctx, in.Name, false, in.Local)
	if err != nil {
		return nil, err
	}
	if len(refused) > 0 {
		return nil, refusedErr(refused)
	}
	return s.vlans.Disable(ctx, &api.VLANRef{Name: in.Name, Reason: in.Reason})
}

func (s *Service) netVLANEnable(ctx context.Context, in *api.NetVLANChange) (*api.VLANEnableAnswer, error) {
	return s.vlans.Enable(ctx, &api.VLANRef{Name: in.Name})
}

func (s *Service) netVLANDelete(ctx context.Context, in *api.NetVLANChange) (*api.VLANDeleteAnswer, error) {
	refused, _, err := s.vlanRefusals(ctx, in.Name, true, in.Local)
	if err != nil {
		return nil, err
	}
	if len(refused) > 0 {
		return nil, refusedErr(refused)
	}
	return s.vlans.Delete(ctx, &api.VLANRef{Name: in.Name})
}

// ipRefusals says what keeps an address from being removed from iface,
// and what its removal would affect.
func (s *Service) ipRefusals(ctx context.Context, iface, ip, local string) (refused, impact []string, err error) {
	p, err := netip.ParsePrefix(ip)
	if err != nil {
		return nil, nil, apierr.Invalid("ip", "invalid ip %q: want the address in CIDR", ip)
	}
	p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits())
	kv, err := s.readKernel()
	if err != nil {
		return nil, nil, apierr.Internal(err.Error(), "the kernel's interfaces cannot be read")
	}
	if _, ok := kv.byName[iface]; !ok {
		return nil, nil, apierr.NotFound("interface %s not found", iface).With("field", "iface")
	}
	for _, a := range kv.addrs[iface] {
		if q, ok := globalAddr(a); ok && q == p && a.Flags&unix.IFA_F_PERMANENT == 0 {
			refused = append(refused, fmt.Sprintf("refused: %s on %s was leased by DHCP, not configured", p, iface))
		}
	}
	g, err := s.guard(local)
	if err != nil {
		return nil, nil, apierr.Internal(err.Error(), "the kernel's socket table cannot be read")
	}
	if why := g.Protected(p.Addr()); why != "" {
		refused = append(refused, "refused: "+why)
	}
	defs, err := s.defaults(kv)
	if err != nil {
		return nil, nil, apierr.Internal(err.Error(), "the kernel's routes cannot be read")
	}
	for _, r := range defs {
		if v, err := netip.ParseAddr(r.Via); err == nil && r.Dev == iface && p.Masked().Contains(v) {
			refused = append(refused, fmt.Sprintf("refused: the default route's gateway %s is reached through %s on %s", v, p, iface))
		}
	}
	if s.vlans.Uses != nil {
		for _, why := range s.vlans.Uses.AddrInUse(ctx, iface, p.Addr()) {
			refused = append(refused, "refused: "+why)
		}
	}
	impact = []string{fmt.Sprintf("%s removed from %s (kernel and store)", p, iface)}
	return refused, impact, nil
}

func (s *Service) netIPCheck(ctx context.Context, in *api.NetIPChange) (*api.NetCheckAnswer, error) {
	refused, impact, err := s.ipRefusals(ctx, in.Iface, in.IP, in.Local)
	if err != nil {
		return nil, err
	}
	return &api.NetCheckAnswer{Refused: nonNilS(refused), Impact: nonNilS(impact)}, nil
}

func (s *Service) netIPAdd(ctx context.Context, in *api.NetIPChange) (*api.AddrAnswer, error) {
	a, err := s.vlans.AddAddr(ctx, &api.AddrChange{Iface: in.Iface, IP: in.IP})
	if err != nil {
		return nil, err
	}
	a.Code = 200
	return a, nil
}

func (s *Service) netIPDelete(ctx context.Context, in *api.NetIPChange) (*api.AddrAnswer, error) {
	refused, _, err := s.ipRefusals(ctx, in.Iface, in.IP, in.Local)
	if err != nil {
		return nil, err
	}
	if len(refused) > 0 {
		return nil, refusedErr(refused)
	}
	return s.vlans.DeleteAddr(ctx, &api.AddrChange{Iface: in.Iface, IP: in.IP})
}
