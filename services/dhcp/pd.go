package dhcp

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	"routerd.dev/proto/kernel"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/shared/apierr"
)

// Prefix delegation on the API. The router-wide pool is the stored
// configuration's (PD.Pool, PD.Len, PD.Reserve) when it has one, else the
// router configuration's pd_pool, pd_len, pd_reserve (ServiceDeps.PD),
// written into the configuration by the first POST /pd. Slices are
// allocated first-fit, aligned to their size, in the usable part of the
// pool (after the reserved band).

// PDDefaults are the router configuration's delegation settings.
type PDDefaults struct {
	Pool    netip.Prefix // pd_pool
	Len     int          // pd_len; 0 is 64
	Slice   int          // pd_slice; 0 is 256
	Reserve int          // pd_reserve
}

func (s *Service) pdParams(c config.Config) (pool netip.Prefix, plen, reserve, slice int) {
	d := s.d.PD
	pool, plen, reserve = c.PD.Pool, c.PD.Len, c.PD.Reserve
	if !pool.IsValid() {
		pool, plen, reserve = d.Pool, d.Len, d.Reserve
	}
	if plen == 0 {
		plen = config.DefaultPDLen
	}
	slice = d.Slice
	if slice == 0 {
		slice = config.DefaultPDSlice
	}
	return pool, plen, reserve, slice
}

func poolTotal(pool netip.Prefix, plen int) uint64 {
	if !pool.IsValid() || plen < pool.Bits() {
		return 0
	}
	return uint64(1) << min(plen-pool.Bits(), 62)
}

type span struct{ from, to uint64 } // [from, to)

// gaps are the free runs of the usable pool, skipping except's slice.
func gaps(c config.Config, total uint64, reserve int, except string) []span {
	var used []span
	for ifc, sl := range c.PD.Slices {
		if ifc != except {
			used = append(used, span{uint64(sl.Index), uint64(sl.Index) + uint64(sl.Size)})
		}
	}
	sort.Slice(used, func(i, j int) bool { return used[i].from < used[j].from })
	var out []span
	at := uint64(max(reserve, 0))
	for _, u := range used {
		if u.from > at {
			out = append(out, span{at, u.from})
		}
		at = max(at, u.to)
	}
	if at < total {
		out = append(out, span{at, total})
	}
	return out
}

// fit is the first index aligned to size with size free prefixes.
func fit(g []span, size uint64) (uint64, bool) {
	for _, x := range g {
		a := (x.from + size - 1) / size * size
		if a+size <= x.to {
			return a, true
		}
	}
	return 0, false
}

func (s *Service) capacity(c config.Config) (api.PDCapacity, *int) {
	pool, plen, reserve, def := s.pdParams(c)
	total := poolTotal(pool, plen)
	out := api.PDCapacity{PrefixesTotal: total, PrefixesReserved: uint64(reserve)}
	for _, sl := range c.PD.Slices {
		out.PrefixesUsed += uint64(sl.Size)
		if sl.Size == def {
			out.VLANsAtDefaultSlice++
		}
	}
	if total >= out.PrefixesReserved+out.PrefixesUsed {
		out.PrefixesFree = total - out.PrefixesReserved - out.PrefixesUsed
	}
	g := gaps(c, total, reserve, "")
	for _, x := range g {
		out.LargestFreeRun = max(out.LargestFreeRun, x.to-x.from)
		ds := uint64(def)
		if first := (x.from + ds - 1) / ds * ds; first+ds <= x.to {
			out.VLANsFreeAtDefaultSlice += (x.to - first) / ds
		}
	}
	var next *int
	if n, ok := fit(g, uint64(def)); ok {
		i := int(n)
		next = &i
	}
	return out, next
}

func (s *Service) liveRoutes() []string {
	h, err := s.d.NS.Netlink()
	if err != nil {
		return []string{}
	}
	defer h.Close()
	out := []string{}
	rs, err := h.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Protocol: kernel.DHCPRouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return out
	}
	for _, r := range rs {
		dev := ""
		if l, err := h.LinkByIndex(r.LinkIndex); err == nil {
			dev = l.Attrs().Name
		}
		out = append(out, fmt.Sprintf("%v via %v dev %s proto routerd-dhcp", r.Dst, r.Gw, dev))
	}
	sort.Strings(out)
	return out
}

func (s *Service) getPD(ctx context.Context, _ *api.None) (*api.PDState, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	c := eng.Config()
	pool, plen, reserve, def := s.pdParams(c)
	out := &api.PDState{PrefixLen: plen, ReservedForPinned: reserve, DefaultSlice: def,
		PerVLAN: map[string]api.PDRange{}, Pinned: []api.PinnedPrefix{}, LiveRoutes: s.liveRoutes()}
	if pool.IsValid() {
		out.Pool = pool.String()
	}
	out.Capacity, _ = s.capacity(c)
	out.Usable = out.Capacity.PrefixesTotal - min(out.Capacity.PrefixesTotal, uint64(max(reserve, 0)))
	for ifc, sl := range c.PD.Slices {
		out.PerVLAN[ifc] = *s.pdRange(c, ifc, sl)
	}
	for _, p := range c.PD.Pinned {
		out.Pinned = append(out.Pinned, api.PinnedPrefix{MAC: p.MAC, Hostname: p.Hostname, Prefix6: p.Prefix.String()})
	}
	for _, cl := range eng.clientsSorted() {
		if cl.Prefix6.IsValid() {
			h := cl.Hostname
			if h == "" {
				h = config.DefaultHostname(cl.MAC)
			}
			out.Pinned = append(out.Pinned, api.PinnedPrefix{MAC: cl.MAC, Hostname: h, Prefix6: cl.Prefix6.String()})
		}
	}
	out.LiveCount = len(out.LiveRoutes)
	return out, nil
}

func (s *Service) addPD(ctx context.Context, in *api.PDSet) (*api.PDAnswer, error) {
	return s.setPD(ctx, in, false)
}

func (s *Service) resizePD(ctx context.Context, in *api.PDSet) (*api.PDAnswer, error) {
	if in.Size == 0 {
		return nil, apierr.Invalid("size", "size is required")
	}
	return s.setPD(ctx, in, true)
}

func (s *Service) setPD(ctx context.Context, in *api.PDSet, resize bool) (*api.PDAnswer, error) {
	if in.Size != 0 && in.Size&(in.Size-1) != 0 {
		return nil, apierr.Invalid("size", "size %d is not a power of two (256, 512, 1024...)", in.Size)
	}
	out := &api.PDAnswer{Iface: in.Iface}
	err := s.changeConfig(ctx, func(c *config.Config) error {
		pool, plen, reserve, def := s.pdParams(*c)
		size := in.Size
		if size == 0 {
			size = def
		}
		old, had := c.PD.Slices[in.Iface]
		i := -1
		for k, n := range c.Networks6 {
			if n.Iface == in.Iface {
				i = k
			}
		}
		switch {
		case resize && !had:
			return apierr.NotFound("no delegation on %s", in.Iface).With("field", "iface")
		case i < 0:
			return apierr.NotFound("no subnet6 block for %s: POST /net6 first", in.Iface).With("field", "iface")
		case !pool.IsValid():
			return apierr.NotFound("no prefix delegation pool is configured (pd_pool)")
		case resize && old.Size == size:
			return apierr.Conflict("%s already has %d prefixes", in.Iface, size)
		}
		if !c.PD.Pool.IsValid() {
			c.PD.Pool, c.PD.Len, c.PD.Reserve = pool, plen, reserve
		}
		if c.PD.Slices == nil {
			c.PD.Slices = map[string]config.Slice{}
		}
		out.Code, out.Message = 201, fmt.Sprintf("%s delegates %d /%d prefixes", in.Iface, size, plen)
		if had && old.Size == size {
			out.Code, out.Message = 200, fmt.Sprintf("%s already delegates %d /%d prefixes", in.Iface, size, plen)
		} else {
			total := poolTotal(pool, plen)
			g := gaps(*c, total, reserve, in.Iface)
			at, ok := fit(g, uint64(size))
			if !ok {
				var run uint64
				for _, x := range g {
					run = max(run, x.to-x.from)
				}
				return apierr.Exhausted("the delegation pool has no room for %d prefixes", size).
					With("requested", size).With("largest_free_run", run)
			}
			c.PD.Slices[in.Iface] = config.Slice{Index: int(at), Size: size}
			if had {
				out.Replaced = s.pdRange(*c, in.Iface, old)
				out.Warning = "the slice moved: CPEs keep prefixes of the old slice until their leases expire"
			}
		}
		out.Network = c.Networks6[i].Prefix.String()
		out.Pool = *s.pdRange(*c, in.Iface, c.PD.Slices[in.Iface])
		out.PrefixLen = plen
		out.Capacity, out.Next = s.capacity(*c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) deletePD(ctx context.Context, in *api.PDIface) (*api.PDDeleteAnswer, error) {
	err := s.changeConfig(ctx, func(c *config.Config) error {
		if _, ok := c.PD.Slices[in.Iface]; !ok {
			return apierr.NotFound("no delegation on %s", in.Iface).With("field", "iface")
		}
		delete(c.PD.Slices, in.Iface)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &api.PDDeleteAnswer{Result: api.Result{Message: fmt.Sprintf("%s no longer delegates prefixes", in.Iface)},
		Note: "delegated routes are withdrawn as their leases expire"}, nil
}

// assignPD pins a prefix of the reserved band to a registered client: the
// client's reservation (its own key) gets prefix6.
func (s *Service) assignPD(ctx context.Context, in *api.PDAssign) (*api.PDAssignAnswer, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	mac, _ := config.NormalizeMAC(in.MAC)
	cl, ok := eng.client(mac)
	if !ok {
		return nil, apierr.NotFound("no registered client %s", mac).With("field", "mac")
	}
	c := eng.Config()
	pool, plen, reserve, _ := s.pdParams(c)
	if !c.PD.Pool.IsValid() {
		return nil, apierr.NotFound("no prefix delegation pool in force: POST /pd first")
	}
	var p netip.Prefix
	if in.Prefix != "" {
		if p, err = netip.ParsePrefix(in.Prefix); err != nil {
			a, aerr := netip.ParseAddr(in.Prefix)
			if aerr != nil {
				return nil, apierr.Invalid("prefix", "invalid prefix %q", in.Prefix)
			}
			p = netip.PrefixFrom(a, plen)
		}
		if p.Bits() != plen || p.Masked() != p || !pool.Contains(p.Addr()) || !p.Addr().Is6() {
			return nil, apierr.Invalid("prefix", "%s is not a /%d inside %v", in.Prefix, plen, pool)
		}
		if config.PrefixIndex(pool, plen, p) >= uint64(reserve) {
			return nil, apierr.Invalid("prefix", "%v is outside the reserved band (the first %d prefixes of %v)", p, reserve, pool)
		}
	} else {
		held := map[netip.Prefix]bool{}
		for _, x := range c.PD.Pinned {
			held[x.Prefix] = true
		}
		for _, x := range eng.clientsSorted() {
			if x.Prefix6.IsValid() && x.MAC != mac {
				held[x.Prefix6] = true
			}
		}
		found := false
		for i := 0; i < reserve; i++ {
			if q := config.PrefixAt(pool, plen, uint64(i)); !held[q] {
				p, found = q, true
				break
			}
		}
		if !found {
			return nil, apierr.Exhausted("no free prefix in the reserved band (%d prefixes)", reserve)
		}
	}
	cl.Prefix6 = p
	if _, err := s.putClient(ctx, wireClient(cl)); err != nil {
		return nil, err
	}
	return &api.PDAssignAnswer{Result: api.Result{Message: fmt.Sprintf("%v pinned to %s", p, mac)}, MAC: mac, Prefix6: p.String()}, nil
}

func (s *Service) unassignPD(ctx context.Context, in *api.PDUnassign) (*api.PDAssignAnswer, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	mac, _ := config.NormalizeMAC(in.MAC)
	cl, ok := eng.client(mac)
	if !ok || !cl.Prefix6.IsValid() {
		return nil, apierr.NotFound("no pinned prefix for %s", mac).With("field", "mac")
	}
	p := cl.Prefix6
	cl.Prefix6 = netip.Prefix{}
	if _, err := s.putClient(ctx, wireClient(cl)); err != nil {
		return nil, err
	}
	return &api.PDAssignAnswer{Result: api.Result{Message: fmt.Sprintf("%v no longer pinned to %s", p, mac)}, MAC: mac, Prefix6: p.String()}, nil
}

// PDFrom reads the router configuration's pd_pool, pd_len, pd_slice and
// pd_reserve; an empty pool is no pool.
func PDFrom(pool string, plen, slice, reserve int) (PDDefaults, error) {
	d := PDDefaults{Len: plen, Slice: slice, Reserve: reserve}
	if pool == "" {
		return d, nil
	}
	p, err := netip.ParsePrefix(pool)
	if err != nil || !p.Addr().Is6() || p.Masked() != p {
		return d, fmt.Errorf("pd_pool %q is not an IPv6 network", pool)
	}
	if plen != 0 && (plen < p.Bits() || plen > 64) {
		return d, fmt.Errorf("pd_len %d outside %d-64", plen, p.Bits())
	}
	if slice < 0 || slice&(slice-1) != 0 {
		return d, fmt.Errorf("pd_slice %d is not a power of two", slice)
	}
	d.Pool = p
	return d, nil
}
