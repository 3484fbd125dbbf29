package cgnat

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/cgnat/nft"
	"routerd.dev/services/cgnat/slot"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

type (
	nftBatch = nft.Batch
	txn      = store.Txn
)

func (s *Service) commitChunks(ctx context.Context, ops []func(*txn)) error {
	for len(ops) > 0 {
		n := min(100, len(ops))
		t := s.st.Txn()
		for _, op := range ops[:n] {
			op(t)
		}
		if _, err := t.Commit(ctx); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

func (s *Service) sampleLocked(sub *Sub) api.CGNATSample {
	out := api.CGNATSample{MAC: sub.MAC, PrivateIP: sub.IP, Slot: sub.Slot}
	if m, ok := s.plan.Slot(sub.Slot); ok {
		out.Public = fmt.Sprintf("%s:%d-%d", m.Public, m.PortStart, m.PortEnd)
	}
	return out
}

// Status is GET /cgnat.
func (s *Service) Status(ctx context.Context, _ *api.None) (*api.CGNATStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.statusLocked()
	return &st, nil
}

func (s *Service) statusLocked() api.CGNATStatus {
	c := s.cfg
	capacity, assigned := s.plan.Capacity(), s.assignedLocked()
	st := api.CGNATStatus{
		Enabled: c.Enabled, Iface: c.Iface, Pool: c.Pool, PoolIPs: s.plan.Addresses(),
		PortRange: fmt.Sprintf("%d-%d", c.PortMin, c.PortMax), PortMin: c.PortMin, PortMax: c.PortMax,
		BlockSize: c.BlockSize, SubsPerIP: s.plan.PerIP(), Capacity: capacity, Assigned: assigned,
		Free: capacity - assigned, Waiting: len(s.waiting) + len(s.subs) - assigned,
		Exempt: append([]string{}, c.Exempt...), Sample: []api.CGNATSample{}, AuditLog: s.audit.path, ClientsSynced: s.clientsOK,
	}
	for sl := 0; sl < capacity && len(st.Sample) < 5 && len(st.Sample) < len(s.bySlot); sl++ {
		if sub := s.bySlot[sl]; sub != nil {
			st.Sample = append(st.Sample, s.sampleLocked(sub))
		}
	}
	return st
}

// Set is POST /cgnat: any subset of the configuration.
func (s *Service) Set(ctx context.Context, r *api.CGNATSet) (*api.CGNATSetAnswer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cfg
	c := old
	c.Exempt = append([]string{}, old.Exempt...)
	if r.Enabled != nil {
		c.Enabled = *r.Enabled
	}
	if r.Iface != nil {
		c.Iface = *r.Iface
	}
	if r.Pool != nil {
		addrs, err := slot.ParsePool(*r.Pool)
		if err != nil {
			return nil, apierr.Invalid("pool", "%s", "invalid pool: "+err.Error())
		}
		c.Pool = slot.FormatPool(addrs)
	}
	if r.PortMin != nil {
		c.PortMin = *r.PortMin
	}
	if r.PortMax != nil {
		c.PortMax = *r.PortMax
	}
	if r.BlockSize != nil {
		c.BlockSize = *r.BlockSize
	}
	if r.Exempt != nil {
		c.Exempt = []string{}
		for _, e := range *r.Exempt {
			p, err := netip.ParsePrefix(e)
			if err != nil || !p.Addr().Is4() {
				return nil, apierr.Invalid("exempt", "%s", "invalid exempt network "+e)
			}
			c.Exempt = append(c.Exempt, p.Masked().String())
		}
	}
	if c.PortMin > c.PortMax {
		return nil, apierr.Invalid("port_min", "%s", fmt.Sprintf("port_min %d is above port_max %d", c.PortMin, c.PortMax))
	}
	if c.BlockSize > c.PortMax-c.PortMin+1 {
		return nil, apierr.Invalid("block_size", "%s", fmt.Sprintf("block_size %d is larger than the port range %d-%d", c.BlockSize, c.PortMin, c.PortMax))
	}
	if c.Enabled {
		if c.Iface == "" {
			return nil, apierr.Invalid("iface", "enabling needs a valid WAN interface")
		}
		if _, err := s.nl.LinkByName(c.Iface); err != nil {
			return nil, apierr.Invalid("iface", "%s", "enabling needs a valid WAN interface: "+c.Iface+" does not exist")
		}
		if c.Pool == "" {
			return nil, apierr.Invalid("pool", "enabling needs a non-empty public IP pool")
		}
	}
	plan, exempt, err := buildPlan(c)
	if err != nil {
		return nil, apierr.Invalid("pool", "%s", err.Error())
	}
	if _, err := s.st.Txn().Put(s.keyConfig(), c).Commit(ctx); err != nil {
		return nil, err
	}
	// The audit log says the old mappings ended and the new ones began
	// when any of them moved.
	oldPlan, oldExempt := s.plan, s.exempt
	moved := old.Enabled != c.Enabled || old.Pool != c.Pool || old.PortMin != c.PortMin || old.PortMax != c.PortMax || old.BlockSize != c.BlockSize
	var before []Sub
	if moved {
		for _, sub := range s.subs {
			before = append(before, *sub)
		}
	}
	s.cfg, s.plan, s.exempt = c, plan, exempt
	if _, err := s.reconcileLocked(); err != nil {
		s.cfg, s.plan, s.exempt = old, oldPlan, oldExempt
		_, _ = s.st.Txn().Put(s.keyConfig(), old).Commit(ctx)
		_, _ = s.reconcileLocked()
		return nil, apierr.Internal(err.Error(), "the CGNAT configuration could not be applied; rolled back")
	}
	if moved {
		s.cfg, s.plan = old, oldPlan
		for i := range before {
			s.logMappingLocked("release", &before[i])
		}
		s.cfg, s.plan = c, plan
		for _, sub := range s.subs {
			s.logMappingLocked("assign", sub)
		}
	}
	// Exempt changes and new capacity: clients excluded or waiting.
	if strings.Join(old.Exempt, ",") != strings.Join(c.Exempt, ",") {
		for _, sub := range s.subs {
			if !s.eligibleLocked(api.Client{MAC: sub.MAC, IP: sub.IP}) {
				s.untranslated[sub.MAC] = api.Client{MAC: sub.MAC, IP: sub.IP, Hostname: sub.Hostname, Iface: sub.Iface}
				if err := s.releaseLocked(ctx, sub); err != nil {
					s.deps.Log.Warn("exempt client's slot not released", "mac", sub.MAC, "err", err)
				}
			}
		}
		// Clients no longer exempt wait for a slot (fill gives it).
		for mac, cl := range s.untranslated {
			if s.eligibleLocked(cl) {
				delete(s.untranslated, mac)
				s.waiting[mac] = cl
			}
		}
	}
	s.fillLocked(ctx)
	s.checkFullLocked()
	msg := "CGNAT updated"
	switch {
	case c.Enabled && !old.Enabled:
		msg = "CGNAT enabled"
	case !c.Enabled && old.Enabled:
		msg = "CGNAT disabled"
	}
	return &api.CGNATSetAnswer{Result: api.Result{Message: msg}, Status: s.statusLocked()}, nil
}

// Lookup is GET /cgnat/lookup: the formula's inverse, then the slot's
// holder; O(1).
func (s *Service) Lookup(ctx context.Context, r *api.CGNATLookupReq) (*api.CGNATLookup, error) {
	pub, err := netip.ParseAddr(r.PublicIP)
	if err != nil || !pub.Is4() {
		return nil, apierr.Invalid("public_ip", "invalid public_ip")
	}
	if r.At != "" {
		return s.lookupAt(ctx, pub, r.Port, r.At)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub, m, ok := s.lookupLocked(pub, r.Port); ok {
		host := sub.Hostname
		sl, ps, pe := m.Slot, m.PortStart, m.PortEnd
		return &api.CGNATLookup{Found: true, MAC: sub.MAC, PrivateIP: sub.IP, Hostname: &host, PublicIP: pub.String(),
			PortStart: &ps, PortEnd: &pe, Slot: &sl}, nil
	}
	port := r.Port
	return &api.CGNATLookup{Found: false, PublicIP: pub.String(), Port: &port}, nil
}

func (s *Service) lookupLocked(pub netip.Addr, port int) (*Sub, slot.Mapping, bool) {
	if !s.cfg.Enabled {
		return nil, slot.Mapping{}, false
	}
	sl, ok := s.plan.Lookup(pub, port)
	if !ok {
		return nil, slot.Mapping{}, false
	}
	sub := s.bySlot[sl]
	if sub == nil {
		return nil, slot.Mapping{}, false
	}
	m, _ := s.plan.Slot(sl)
	return sub, m, true
}

// LookupLocal is the lookup without the bus (for the benchmark).
func (s *Service) LookupLocal(pub netip.Addr, port int) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, _, ok := s.lookupLocked(pub, port)
	if !ok {
		return "", false
	}
	return sub.MAC, true
}

// NATList is GET /nat.
func (s *Service) NATList(ctx context.Context, _ *api.None) (*api.NATList, error) {
	s.mu.Lock()
	out := &api.NATList{Pools: []api.NATPool{}}
	for _, p := range s.pools {
		out.Pools = append(out.Pools, p)
	}
	s.mu.Unlock()
	sort.Slice(out.Pools, func(i, j int) bool { return out.Pools[i].Iface < out.Pools[j].Iface })
	out.Count = len(out.Pools)
	out.LivePostrouting = s.k.Live(nft.ChainPost)
	return out, nil
}

// NATAdd is POST /nat: the interface's pool, added or replaced.
func (s *Service) NATAdd(ctx context.Context, r *api.NATAdd) (*api.NATAnswer, error) {
	if _, err := s.nl.LinkByName(r.Iface); err != nil {
		return nil, apierr.NotFound("%s", "interface "+r.Iface+" not found")
	}
	end := r.PoolEnd
	if end == "" {
		end = r.PoolStart
	}
	p := api.NATPool{Iface: r.Iface, PoolStart: r.PoolStart, PoolEnd: end, Exempt: []string{}, Comment: r.Comment,
		Created: s.deps.Now().UTC().Format(timeFormat)}
	for _, e := range r.Exempt {
		pf, err := netip.ParsePrefix(e)
		if err != nil || !pf.Addr().Is4() {
			return nil, apierr.Invalid("exempt", "%s", "invalid exempt network "+e)
		}
		p.Exempt = append(p.Exempt, pf.Masked().String())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.pools[r.Iface]
	if _, err := s.st.Txn().Put(s.keyPool(r.Iface), p).Commit(ctx); err != nil {
		return nil, err
	}
	s.pools[r.Iface] = p
	if _, err := s.reconcileLocked(); err != nil {
		if had {
			s.pools[r.Iface] = old
			_, _ = s.st.Txn().Put(s.keyPool(r.Iface), old).Commit(ctx)
		} else {
			delete(s.pools, r.Iface)
			_, _ = s.st.Txn().Delete(s.keyPool(r.Iface)).Commit(ctx)
		}
		_, _ = s.reconcileLocked()
		return nil, apierr.Internal(err.Error(), "the NAT rule could not be installed")
	}
	msg := "NAT pool added"
	if had {
		msg = "NAT pool replaced"
	}
	return &api.NATAnswer{Result: api.Result{Message: msg}, Pool: p}, nil
}

// NATDelete is DELETE /nat.
func (s *Service) NATDelete(ctx context.Context, r *api.NATDel) (*api.NATDelAnswer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pools[r.Iface]
	if !ok {
		return nil, apierr.NotFound("%s", "no NAT pool on "+r.Iface)
	}
	n, err := s.removePoolLocked(ctx, r.Iface)
	if err != nil {
		return nil, err
	}
	return &api.NATDelAnswer{Result: api.Result{Message: "NAT pool removed"}, Iface: r.Iface, RulesRemoved: n, Pool: p}, nil
}

func (s *Service) removePoolLocked(ctx context.Context, iface string) (int, error) {
	p := s.pools[iface]
	if _, err := s.st.Txn().Delete(s.keyPool(iface)).Commit(ctx); err != nil {
		return 0, err
	}
	delete(s.pools, iface)
	if _, err := s.reconcileLocked(); err != nil {
		s.pools[iface] = p
		_, _ = s.st.Txn().Put(s.keyPool(iface), p).Commit(ctx)
		return 0, apierr.Internal(err.Error(), "the NAT rules could not be removed")
	}
	return len(p.Exempt) + 1, nil
}

// ForwardsList is GET /pf.
func (s *Service) ForwardsList(ctx context.Context, _ *api.None) (*api.ForwardList, error) {
	s.mu.Lock()
	out := &api.ForwardList{Forwards: []api.Forward{}}
	for _, f := range s.forwards {
		f.Applied = s.appliedLocked(f)
		out.Forwards = append(out.Forwards, f)
	}
	s.mu.Unlock()
	sort.Slice(out.Forwards, func(i, j int) bool {
		a, b := out.Forwards[i], out.Forwards[j]
		return forwardID(a.Proto, a.PublicIP, a.PublicPort) < forwardID(b.Proto, b.PublicIP, b.PublicPort)
	})
	out.Count = len(out.Forwards)
	out.Live = s.k.Live(nft.ChainPre)
	return out, nil
}

// ForwardAdd is POST /pf.
func (s *Service) ForwardAdd(ctx context.Context, r *api.ForwardAdd) (*api.ForwardAnswer, error) {
	f := api.Forward{Proto: r.Proto, PublicIP: r.PublicIP, PublicPort: r.PublicPort, ClientIP: r.ClientIP,
		ClientPort: r.ClientPort, Comment: r.Comment, Created: s.deps.Now().UTC().Format(timeFormat)}
	if f.Proto == "" {
		f.Proto = "tcp"
	}
	id := forwardID(f.Proto, f.PublicIP, f.PublicPort)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.forwards[id]; dup {
		return nil, apierr.Conflict("%s", fmt.Sprintf("a forward for %s %s:%d exists", f.Proto, orAny(f.PublicIP), f.PublicPort))
	}
	key := s.keyForward(f)
	if _, err := s.st.Txn().IfAbsent(key).Put(key, f).Commit(ctx); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, apierr.Conflict("a forward for that proto, public_ip and public_port exists")
		}
		return nil, err
	}
	s.forwards[id] = f
	if _, err := s.reconcileLocked(); err != nil {
		delete(s.forwards, id)
		_, _ = s.st.Txn().Delete(key).Commit(ctx)
		_, _ = s.reconcileLocked()
		return nil, apierr.Internal(err.Error(), "the forward could not be installed")
	}
	f.Applied = s.appliedLocked(f)
	msg := "Port forward added"
	if !f.Applied {
		msg = "Port forward added; not applied while the client's VLAN is switched off"
	}
	return &api.ForwardAnswer{Result: api.Result{Message: msg}, Forward: f}, nil
}

func orAny(ip string) string {
	if ip == "" {
		return "any"
	}
	return ip
}

// ForwardDelete is DELETE /pf.
func (s *Service) ForwardDelete(ctx context.Context, r *api.ForwardDel) (*api.ForwardDelAnswer, error) {
	proto := r.Proto
	if proto == "" {
		proto = "tcp"
	}
	id := forwardID(proto, r.PublicIP, r.PublicPort)
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.forwards[id]
	if !ok {
		return nil, apierr.NotFound("%s", fmt.Sprintf("no forward for %s %s:%d", proto, orAny(r.PublicIP), r.PublicPort))
	}
	if err := s.removeForwardLocked(ctx, id); err != nil {
		return nil, err
	}
	return &api.ForwardDelAnswer{Result: api.Result{Message: "Port forward removed"}, Forward: f}, nil
}

func (s *Service) removeForwardLocked(ctx context.Context, id string) error {
	f := s.forwards[id]
	key := s.keyForward(f)
	if _, err := s.st.Txn().Delete(key).Commit(ctx); err != nil {
		return err
	}
	delete(s.forwards, id)
	if _, err := s.reconcileLocked(); err != nil {
		s.forwards[id] = f
		_, _ = s.st.Txn().Put(key, f).Commit(ctx)
		return apierr.Internal(err.Error(), "the forward could not be removed")
	}
	return nil
}

// ifaceNets are the IPv4 networks on an interface now.
func (s *Service) ifaceNets(iface string) []netip.Prefix {
	l, err := s.nl.LinkByName(iface)
	if err != nil {
		return nil
	}
	addrs, err := s.nl.AddrList(l, 2 /* AF_INET */)
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.IPNet.String()); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

func (s *Service) forwardsOnLocked(nets []netip.Prefix) []string {
	var out []string
	for id, f := range s.forwards {
		a, err := netip.ParseAddr(f.ClientIP)
		if err != nil {
			continue
		}
		for _, p := range nets {
			if p.Contains(a) {
				out = append(out, id)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// Uses answers netcfg's refusals: whether CGNAT translates through iface
// (its WAN interface, or subscribers with slots behind it).
func (s *Service) Uses(ctx context.Context, r *api.NATIface) (*api.NATUse, error) {
	nets := s.ifaceNets(r.Iface)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &api.NATUse{Forwards: []string{}}
	if s.cfg.Enabled {
		if s.cfg.Iface == r.Iface {
			out.CGNAT = true
			out.Fix = "CGNAT translates out of " + r.Iface + ": switch it off or move it to another interface first (POST /cgnat)"
		} else {
			for _, sub := range s.subs {
				a, _ := netip.ParseAddr(sub.IP)
				behind := sub.Iface == r.Iface
				for _, p := range nets {
					behind = behind || p.Contains(a)
				}
				if behind && sub.Slot < s.plan.Capacity() {
					out.CGNAT = true
					out.Fix = "CGNAT translates subscribers behind " + r.Iface + " (e.g. " + sub.MAC + "): delete them or switch CGNAT off first (POST /cgnat)"
					break
				}
			}
		}
	}
	if p, ok := s.pools[r.Iface]; ok {
		txt := p.PoolStart + "-" + p.PoolEnd
		out.Pool = &txt
	}
	for _, id := range s.forwardsOnLocked(nets) {
		out.Forwards = append(out.Forwards, forwardText(s.forwards[id]))
	}
	return out, nil
}

// IfaceRemove removes the NAT pool and the forwards of an interface being
// deleted.
func (s *Service) IfaceRemove(ctx context.Context, r *api.NATIface) (*api.NATIfaceRemoved, error) {
	nets := s.ifaceNets(r.Iface)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &api.NATIfaceRemoved{RemovedForwards: []string{}}
	if _, ok := s.pools[r.Iface]; ok {
		if _, err := s.removePoolLocked(ctx, r.Iface); err != nil {
			return nil, err
		}
		out.RemovedNAT = true
	}
	for _, id := range s.forwardsOnLocked(nets) {
		txt := forwardText(s.forwards[id])
		if err := s.removeForwardLocked(ctx, id); err != nil {
			return nil, err
		}
		out.RemovedForwards = append(out.RemovedForwards, txt)
	}
	out.Message = fmt.Sprintf("NAT of %s removed", r.Iface)
	return out, nil
}
