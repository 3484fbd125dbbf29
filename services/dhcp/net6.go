package dhcp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/shared/apierr"
)

// DHCPv6 and router advertisements on the API: POST/DELETE /net6,
// /net6/pool, /net6/lease, the net6-dns action. Every change goes through
// changeConfig (applied first, stored second, rolled back on refusal).

func strs(a []netip.Addr) []string {
	if len(a) == 0 {
		return nil
	}
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = x.String()
	}
	return out
}

func raOK(iface, what string) api.RAStatus {
	return api.RAStatus{OK: true, Message: fmt.Sprintf("router advertisements on %s %s", iface, what)}
}

func (s *Service) addNet6(ctx context.Context, in *api.Net6Iface) (*api.Net6Answer, error) {
	a, err := s.liveAddr(in.Iface)
	if err != nil {
		return nil, err
	}
	if !a.v6.IsValid() {
		return nil, apierr.NotFound("%s has no global IPv6 address", in.Iface).With("field", "iface")
	}
	n := config.Network6{Iface: in.Iface, Gateway: a.v6.Addr(), Prefix: a.v6.Masked()}
	out := &api.Net6Answer{Network6: api.Net6Block{Iface: in.Iface, Gateway: n.Gateway.String(), Prefix: n.Prefix.Bits(), Network: n.Prefix.String()}}
	out.Message = fmt.Sprintf("Serving %s on %s by DHCPv6 and router advertisements", n.Prefix, in.Iface)
	err = s.changeConfig(ctx, func(c *config.Config) error {
		replaced := false
		for i, old := range c.Networks6 {
			if old.Iface == in.Iface {
				if old.Prefix == n.Prefix {
					n.PoolStart, n.PoolEnd = old.PoolStart, old.PoolEnd
				}
				c.Networks6[i], replaced = n, true
				out.Message = fmt.Sprintf("%s on %s already served; updated", n.Prefix, in.Iface)
			}
		}
		if !replaced {
			c.Networks6 = append(c.Networks6, n)
		}
		if first, last, err := n.Pool(); err == nil {
			out.Pool = &api.Pool6{Start: first.String(), End: last.String()}
		} else {
			out.Warning = err.Error()
		}
		// Resolvers: the global ones, else those of another DHCPv6 subnet.
		switch o := c.DNS.PerIface[in.Iface]; {
		case len(o.V6) > 0:
			out.DNS = strs(o.V6)
		case len(c.DNS.V6) > 0:
			out.DNS = strs(c.DNS.V6)
		default:
			for _, other := range c.Networks6 {
				if ov := c.DNS.PerIface[other.Iface]; other.Iface != in.Iface && len(ov.V6) > 0 {
					if c.DNS.PerIface == nil {
						c.DNS.PerIface = map[string]config.DNSOverride{}
					}
					o.V6 = slices.Clone(ov.V6)
					c.DNS.PerIface[in.Iface] = o
					out.DNS = strs(o.V6)
					out.Note = "resolvers inherited from " + other.Iface
					break
				}
			}
			if out.DNS == nil {
				out.Note = "no IPv6 resolver to inherit: set one with POST /dns"
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.RADVD = raOK(in.Iface, "updated")
	return out, nil
}

// unserved drops what only a served interface may have once iface is
// served by neither family: its DNS override.
func unserved(c *config.Config, iface string) {
	for _, n := range c.Networks {
		if n.Iface == iface {
			return
		}
	}
	for _, n := range c.Networks6 {
		if n.Iface == iface {
			return
		}
	}
	delete(c.DNS.PerIface, iface)
	delete(c.Suspended, iface)
}

func (s *Service) pdRange(c config.Config, iface string, sl config.Slice) *api.PDRange {
	pool, plen, _, _ := s.pdParams(c)
	r := &api.PDRange{Index: sl.Index, Size: sl.Size, Len: plen}
	if sl.Size > 0 {
		r.Slice = sl.Index / sl.Size
	}
	if pool.IsValid() {
		r.Start = config.PrefixAt(pool, plen, uint64(sl.Index)).String()
		r.End = config.PrefixAt(pool, plen, uint64(sl.Index+sl.Size-1)).String()
	}
	for _, n := range c.Networks6 {
		if n.Iface == iface {
			r.Network6 = n.Prefix.String()
		}
	}
	return r
}

func (s *Service) deleteNet6(ctx context.Context, in *api.Net6Iface) (*api.Net6DeleteAnswer, error) {
	out := &api.Net6DeleteAnswer{}
	err := s.changeConfig(ctx, func(c *config.Config) error {
		i := slices.IndexFunc(c.Networks6, func(n config.Network6) bool { return n.Iface == in.Iface })
		if i < 0 {
			return apierr.NotFound("%s is not served by DHCPv6", in.Iface).With("field", "iface")
		}
		if sl, ok := c.PD.Slices[in.Iface]; ok {
			out.RemovedPDPool = s.pdRange(*c, in.Iface, sl)
			delete(c.PD.Slices, in.Iface)
		}
		out.Message = fmt.Sprintf("%s on %s no longer served by DHCPv6", c.Networks6[i].Prefix, in.Iface)
		c.Networks6 = slices.Delete(c.Networks6, i, i+1)
		unserved(c, in.Iface)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.RADVD = raOK(in.Iface, "stopped")
	return out, nil
}

func (s *Service) setNet6Pool(ctx context.Context, in *api.Net6PoolSet) (*api.Net6PoolAnswer, error) {
	a, err := s.liveAddr(in.Iface)
	if err != nil {
		return nil, err
	}
	if !a.v6.IsValid() {
		return nil, apierr.NotFound("%s has no global IPv6 address", in.Iface).With("field", "iface")
	}
	if (in.Start == "") != (in.End == "") {
		return nil, apierr.Invalid("end", "give both start and end, or neither to derive the range")
	}
	out := &api.Net6PoolAnswer{Iface: in.Iface}
	err = s.changeConfig(ctx, func(c *config.Config) error {
		i := slices.IndexFunc(c.Networks6, func(n config.Network6) bool { return n.Iface == in.Iface })
		if i < 0 {
			return apierr.NotFound("no subnet6 block for %s: POST /net6 first", in.Iface).With("field", "iface")
		}
		n := &c.Networks6[i]
		n.PoolStart, n.PoolEnd = netip.Addr{}, netip.Addr{}
		if in.Start != "" {
			n.PoolStart, n.PoolEnd = netip.MustParseAddr(in.Start), netip.MustParseAddr(in.End)
			for f, x := range map[string]netip.Addr{"start": n.PoolStart, "end": n.PoolEnd} {
				if !n.Prefix.Contains(x) {
					return apierr.Invalid(f, "%s %v is outside %v", f, x, n.Prefix)
				}
			}
		}
		first, last, err := n.Pool()
		if err != nil {
			return apierr.Invalid("start", "%v", err)
		}
		out.Network, out.Pool = n.Prefix.String(), api.Pool6{Start: first.String(), End: last.String()}
		out.Message = fmt.Sprintf("DHCPv6 pool of %s: %v - %v", in.Iface, first, last)
		if len(c.DNS.V6) == 0 && len(c.DNS.PerIface[in.Iface].V6) == 0 {
			for _, other := range c.Networks6 {
				if ov := c.DNS.PerIface[other.Iface]; other.Iface != in.Iface && len(ov.V6) > 0 {
					if c.DNS.PerIface == nil {
						c.DNS.PerIface = map[string]config.DNSOverride{}
					}
					o := c.DNS.PerIface[in.Iface]
					o.V6 = slices.Clone(ov.V6)
					c.DNS.PerIface[in.Iface] = o
					out.DNSAdded = strs(o.V6)
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) setNet6Lease(ctx context.Context, in *api.Net6LeaseSet) (*api.Net6LeaseAnswer, error) {
	valid := time.Duration(in.Valid) * time.Second
	pref := valid / 2
	if in.Preferred > 0 {
		pref = time.Duration(in.Preferred) * time.Second
	}
	out := &api.Net6LeaseAnswer{Changed: []string{}, Note: "existing leases keep their lifetimes until they renew"}
	err := s.changeConfig(ctx, func(c *config.Config) error {
		cur := c.WithDefaults().Lifetimes6
		if cur.Valid != valid {
			out.Changed = append(out.Changed, fmt.Sprintf("valid %d -> %d", int(cur.Valid.Seconds()), in.Valid))
		}
		if cur.Preferred != pref {
			out.Changed = append(out.Changed, fmt.Sprintf("preferred %d -> %d", int(cur.Preferred.Seconds()), int(pref.Seconds())))
		}
		c.Lifetimes6 = config.Lifetimes6{Valid: valid, Preferred: pref}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Message = fmt.Sprintf("DHCPv6 lifetimes: valid %d s, preferred %d s", in.Valid, int(pref.Seconds()))
	if len(out.Changed) == 0 {
		out.Message += " (unchanged)"
	}
	out.RADVD = api.RAStatus{OK: true, Message: "router advertisements carry the new lifetimes"}
	return out, nil
}

func parseAddrs(field string, in []string, v6 bool) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, x := range in {
		for _, p := range strings.Split(x, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			a, err := netip.ParseAddr(p)
			if err != nil || a.Is6() != v6 || a.Is4In6() {
				fam := "IPv4"
				if v6 {
					fam = "IPv6"
				}
				return nil, apierr.Invalid(field, "%s: %q is not an %s address", field, p, fam)
			}
			out = append(out, a)
		}
	}
	return out, nil
}

func dnsStatus(d config.DNS) api.DNSStatus {
	return api.DNSStatus{IPv4: nonNil(strs(d.V4)), IPv6: nonNil(strs(d.V6)), Domain: d.Domain}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Service) setNet6DNS(ctx context.Context, in *api.Net6DNSSet) (*api.Net6DNSAnswer, error) {
	v6, err := parseAddrs("servers", in.Servers, true)
	if err != nil {
		return nil, err
	}
	if len(v6) == 0 {
		return nil, apierr.Invalid("servers", "servers: at least one IPv6 resolver")
	}
	out := &api.Net6DNSAnswer{}
	err = s.changeConfig(ctx, func(c *config.Config) error {
		c.DNS.V6 = v6
		if in.ClearDomain {
			c.DNS.Domain = ""
		} else if in.Domain != "" {
			c.DNS.Domain = in.Domain
		}
		out.Status = dnsStatus(c.DNS)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Message = "DHCPv6 resolvers set; clients pick them up at renewal"
	return out, nil
}
