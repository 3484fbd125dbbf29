package dhcp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/apierr"
)

// DNS on the API (GET/POST/DELETE /dns, /dns/{iface}) and option 82
// (GET/POST /option82). Clients pick resolver changes up at renewal.

// servedIfaces lists the interfaces served by either family, sorted.
func servedIfaces(c config.Config) []string {
	set := map[string]bool{}
	for _, n := range c.Networks {
		set[n.Iface] = true
	}
	for _, n := range c.Networks6 {
		set[n.Iface] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func effective(c config.Config) ([]api.DNSEffective, []string) {
	var eff []api.DNSEffective
	none := []string{}
	for _, ifc := range servedIfaces(c) {
		e := api.DNSEffective{Iface: ifc, Enabled: true, IPv4: []string{}, IPv6: []string{}, IPv4Source: "none", IPv6Source: "none"}
		o := c.DNS.PerIface[ifc]
		switch {
		case len(o.V4) > 0:
			e.IPv4, e.IPv4Source = strs(o.V4), "per-vlan"
		case len(c.DNS.V4) > 0:
			e.IPv4, e.IPv4Source = strs(c.DNS.V4), "global"
		}
		switch {
		case len(o.V6) > 0:
			e.IPv6, e.IPv6Source = strs(o.V6), "per-vlan"
		case len(c.DNS.V6) > 0:
			e.IPv6, e.IPv6Source = strs(c.DNS.V6), "global"
		}
		if e.IPv4Source == "none" && e.IPv6Source == "none" {
			none = append(none, ifc)
		}
		eff = append(eff, e)
	}
	if eff == nil {
		eff = []api.DNSEffective{}
	}
	return eff, none
}

func (s *Service) getDNS(ctx context.Context, _ *api.None) (*api.DNSState, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	c := eng.Config()
	out := &api.DNSState{Global: dnsStatus(c.DNS), PerVLAN: api.DNSPerVLAN{IPv4: map[string][]string{}, IPv6: map[string][]string{}}}
	for ifc, o := range c.DNS.PerIface {
		for _, n := range c.Networks {
			if n.Iface == ifc && len(o.V4) > 0 {
				out.PerVLAN.IPv4[n.Prefix.String()] = strs(o.V4)
			}
		}
		for _, n := range c.Networks6 {
			if n.Iface == ifc && len(o.V6) > 0 {
				out.PerVLAN.IPv6[n.Prefix.String()] = strs(o.V6)
			}
		}
	}
	out.Effective, out.ServingNoResolver = effective(c)
	return out, nil
}

func (s *Service) setDNS(ctx context.Context, in *api.DNSSet) (*api.DNSSetAnswer, error) {
	v4, err := parseAddrs("v4", in.V4, false)
	if err != nil {
		return nil, err
	}
	v6, err := parseAddrs("v6", in.V6, true)
	if err != nil {
		return nil, err
	}
	if in.Iface != "" {
		return s.setDNSIface(ctx, in.Iface, v4, v6)
	}
	if len(v4) == 0 && len(v6) == 0 && in.Domain == "" {
		return nil, apierr.Invalid("v4", "give v4, v6 or domain")
	}
	out := &api.DNSSetAnswer{Changed: []string{}, Note: "clients pick the change up at their next renewal"}
	err = s.changeConfig(ctx, func(c *config.Config) error {
		if len(v4) > 0 && !slices.Equal(v4, c.DNS.V4) {
			c.DNS.V4 = v4
			out.Changed = append(out.Changed, "ipv4")
		}
		if len(v6) > 0 && !slices.Equal(v6, c.DNS.V6) {
			c.DNS.V6 = v6
			out.Changed = append(out.Changed, "ipv6")
		}
		if in.Domain != "" && in.Domain != c.DNS.Domain {
			c.DNS.Domain = in.Domain
			out.Changed = append(out.Changed, "domain")
		}
		if in.Apply == "all" {
			out.AppliedTo = []string{}
			for ifc := range c.DNS.PerIface {
				out.AppliedTo = append(out.AppliedTo, ifc)
			}
			sort.Strings(out.AppliedTo)
			c.DNS.PerIface = nil
		} else if len(v6) > 0 {
			for ifc, o := range c.DNS.PerIface {
				if len(o.V6) > 0 {
					out.Shadowing = append(out.Shadowing, ifc)
				}
			}
			sort.Strings(out.Shadowing)
			if len(out.Shadowing) > 0 {
				out.Warning = "these VLANs keep their own IPv6 resolvers, which hide the new default: " + strings.Join(out.Shadowing, ", ") + " (apply=all drops them)"
			}
		}
		st := dnsStatus(c.DNS)
		out.Status = &st
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Message = "DNS resolvers set"
	if len(out.Changed) == 0 {
		out.Message = "DNS resolvers unchanged"
	}
	return out, nil
}

func (s *Service) setDNSIface(ctx context.Context, iface string, v4, v6 []netip.Addr) (*api.DNSSetAnswer, error) {
	if len(v4) == 0 && len(v6) == 0 {
		return nil, apierr.Invalid("v4", "give v4 and/or v6")
	}
	out := &api.DNSSetAnswer{Iface: iface, Note: "clients on " + iface + " pick the change up at their next renewal"}
	err := s.changeConfig(ctx, func(c *config.Config) error {
		if !slices.Contains(servedIfaces(*c), iface) {
			return apierr.NotFound("%s is not served (no subnet block)", iface).With("field", "iface")
		}
		if c.DNS.PerIface == nil {
			c.DNS.PerIface = map[string]config.DNSOverride{}
		}
		o := c.DNS.PerIface[iface]
		if len(v4) > 0 {
			o.V4 = v4
		}
		if len(v6) > 0 {
			o.V6 = v6
		}
		c.DNS.PerIface[iface] = o
		out.Override = &api.DNSStatus{IPv4: nonNil(strs(o.V4)), IPv6: nonNil(strs(o.V6))}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Message = "DNS override set on " + iface
	return out, nil
}

func (s *Service) deleteDNSIface(ctx context.Context, in *api.DNSIface) (*api.DNSIfaceDeleteAnswer, error) {
	out := &api.DNSIfaceDeleteAnswer{}
	err := s.changeConfig(ctx, func(c *config.Config) error {
		o, ok := c.DNS.PerIface[in.Iface]
		if !ok {
			return apierr.NotFound("no DNS override on %s", in.Iface).With("field", "iface")
		}
		delete(c.DNS.PerIface, in.Iface)
		out.Removed = api.DNSStatus{IPv4: nonNil(strs(o.V4)), IPv6: nonNil(strs(o.V6))}
		out.NowInherits = dnsStatus(c.DNS)
		out.NowInherits.Domain = ""
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Message = in.Iface + " now inherits the global resolvers"
	return out, nil
}

func (s *Service) clearDNS(ctx context.Context, in *api.DNSClear) (*api.DNSClearAnswer, error) {
	if in.Iface != "" {
		r, err := s.deleteDNSIface(ctx, &api.DNSIface{Iface: in.Iface})
		if err != nil {
			return nil, err
		}
		eng, err := s.engine()
		if err != nil {
			return nil, err
		}
		_, none := effective(eng.Config())
		return &api.DNSClearAnswer{Result: r.Result, Cleared: []string{"override of " + in.Iface}, GlobalNow: r.NowInherits, ServingNoResolver: none}, nil
	}
	out := &api.DNSClearAnswer{Cleared: []string{}}
	err := s.changeConfig(ctx, func(c *config.Config) error {
		g := in.Global
		if (g == "v4" || g == "all") && len(c.DNS.V4) > 0 {
			c.DNS.V4 = nil
			out.Cleared = append(out.Cleared, "ipv4")
		}
		if (g == "v6" || g == "all") && len(c.DNS.V6) > 0 {
			c.DNS.V6 = nil
			out.Cleared = append(out.Cleared, "ipv6")
		}
		if (g == "domain" || g == "all") && c.DNS.Domain != "" {
			c.DNS.Domain = ""
			out.Cleared = append(out.Cleared, "domain")
		}
		if g == "all" {
			// all also removes the per-VLAN IPv6 resolvers.
			for ifc, o := range c.DNS.PerIface {
				if len(o.V6) > 0 {
					o.V6 = nil
					out.Cleared = append(out.Cleared, "ipv6 of "+ifc)
					if len(o.V4) == 0 {
						delete(c.DNS.PerIface, ifc)
					} else {
						c.DNS.PerIface[ifc] = o
					}
				}
			}
		}
		if len(out.Cleared) == 0 {
			return apierr.NotFound("no global %s is set", g)
		}
		out.GlobalNow = dnsStatus(c.DNS)
		_, out.ServingNoResolver = effective(*c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Message = "Cleared " + strings.Join(out.Cleared, ", ")
	return out, nil
}

// Option 82.

func (s *Service) getOption82(ctx context.Context, _ *api.None) (*api.Option82State, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	c := eng.Config()
	_, svcs := eng.ReservationCounts()
	out := &api.Option82State{Count: len(c.Services) + svcs, CaptureEnabled: c.Option82.Enabled, RecentLog: []string{}}
	var with []lease.Lease
	for _, l := range eng.Leases() {
		if l.CircuitID != "" || l.RemoteID != "" {
			with = append(with, l)
		}
	}
	out.FromLeases = len(with)
	sort.Slice(with, func(i, j int) bool { return with[i].Start.After(with[j].Start) })
	for _, l := range with[:min(len(with), 50)] {
		out.RecentLog = append(out.RecentLog, fmt.Sprintf("%s %s %s %v circuit-id=%q remote-id=%q",
			l.Start.UTC().Format("2006-01-02 15:04:05"), l.Iface, l.MAC, l.Addr, l.CircuitID, l.RemoteID))
	}
	return out, nil
}

func (s *Service) setOption82(ctx context.Context, in *api.Option82Set) (*api.Option82Answer, error) {
	err := s.changeConfig(ctx, func(c *config.Config) error {
		c.Option82.Enabled = *in.Enable
		return nil
	})
	if e, ok := err.(*apierr.Error); ok && e.Kind == apierr.KindInternal {
		// The contract answers a refused option 82 change 400 with detail.
		return nil, apierr.BadRequest("the DHCP server rejected the configuration; the change is reverted").With("detail", e.Fields["detail"])
	}
	if err != nil {
		return nil, err
	}
	state := "off"
	if *in.Enable {
		state = "on"
	}
	return &api.Option82Answer{Result: api.Result{Message: "option 82 lookup " + state}}, nil
}
