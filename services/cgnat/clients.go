package cgnat

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/shared/bus"
)

// onClientEvent follows the subscribers service's client.* events.
func (s *Service) onClientEvent(m *nats.Msg) {
	var ev event.Event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		return
	}
	var c api.Client
	if err := json.Unmarshal(ev.Data, &c); err != nil || c.MAC == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if ev.Kind == api.ClientDeleted {
		err = s.RemoveClient(ctx, c.MAC)
	} else {
		err = s.UpsertClient(ctx, c)
	}
	if err != nil {
		s.deps.Log.Warn("client event not applied", "kind", ev.Kind, "mac", c.MAC, "err", err)
	}
}

func normMAC(m string) string { return strings.ToUpper(strings.TrimSpace(m)) }

// eligibleLocked says whether a client gets a slot: an IPv4 address
// outside the exempt networks.
func (s *Service) eligibleLocked(c api.Client) bool {
	a, err := netip.ParseAddr(c.IP)
	if err != nil || !a.Is4() {
		return false
	}
	for _, p := range s.exempt {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// UpsertClient gives a client its slot (the lowest free one, kept for as
// long as the client exists) or follows its change of address: one store
// write and one map element change. A client that finds the pool full
// waits for a slot.
func (s *Service) UpsertClient(ctx context.Context, c api.Client) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.touched != nil {
		s.touched[normMAC(c.MAC)] = true
	}
	return s.upsertLocked(ctx, c)
}

func (s *Service) upsertLocked(ctx context.Context, c api.Client) error {
	c.MAC = normMAC(c.MAC)
	sub := s.subs[c.MAC]
	if !s.eligibleLocked(c) {
		delete(s.waiting, c.MAC)
		s.untranslated[c.MAC] = c
		if sub != nil {
			return s.releaseLocked(ctx, sub)
		}
		return nil
	}
	delete(s.untranslated, c.MAC)
	if sub != nil {
		if sub.IP == c.IP && sub.Hostname == c.Hostname && sub.Iface == c.Iface {
			return nil
		}
		old, upd := *sub, *sub
		upd.IP, upd.Hostname, upd.Iface = c.IP, c.Hostname, c.Iface
		if _, err := s.st.Txn().Put(s.keySlot(c.MAC), upd).Commit(ctx); err != nil {
			return err
		}
		if err := s.k.Apply(s.changeBatchLocked(&old, &upd)); err != nil {
			_, _ = s.st.Txn().Put(s.keySlot(c.MAC), old).Commit(ctx)
			return err
		}
		*sub = upd
		if old.IP != upd.IP {
			s.logMappingLocked("release", &old)
			s.dropFlows(old.IP)
			s.logMappingLocked("assign", sub)
		}
		return nil
	}
	sl, ok := s.alloc.Next(s.plan.Capacity())
	if !ok {
		s.waiting[c.MAC] = c
		return nil
	}
	sub = &Sub{MAC: c.MAC, IP: c.IP, Hostname: c.Hostname, Iface: c.Iface, Slot: sl, Assigned: s.deps.Now().UTC().Format(timeFormat)}
	key := s.keySlot(c.MAC)
	if _, err := s.st.Txn().IfAbsent(key).Put(key, sub).Commit(ctx); err != nil {
		s.alloc.Free(sl)
		return err
	}
	if err := s.k.Apply(s.changeBatchLocked(nil, sub)); err != nil {
		s.alloc.Free(sl)
		_, _ = s.st.Txn().Delete(key).Commit(ctx)
		return err
	}
	s.subs[c.MAC], s.bySlot[sl] = sub, sub
	delete(s.waiting, c.MAC)
	s.logMappingLocked("assign", sub)
	s.pub.Publish(api.EventCGNATAssigned, nil, s.sampleLocked(sub))
	s.checkFullLocked()
	return nil
}

// changeBatchLocked is the element change from old to upd (either nil).
func (s *Service) changeBatchLocked(old, upd *Sub) (b nftBatch) {
	if old != nil {
		if e, _, ok := s.mappingLocked(old); ok {
			b.DelElems = append(b.DelElems, e.Private)
		}
	}
	if upd != nil {
		if e, _, ok := s.mappingLocked(upd); ok {
			b.AddElems = append(b.AddElems, e)
		}
	}
	return b
}

// RemoveClient releases a deleted client's slot.
func (s *Service) RemoveClient(ctx context.Context, mac string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	mac = normMAC(mac)
	if s.touched != nil {
		s.touched[mac] = true
	}
	delete(s.waiting, mac)
	delete(s.untranslated, mac)
	if sub := s.subs[mac]; sub != nil {
		return s.releaseLocked(ctx, sub)
	}
	return nil
}

func (s *Service) releaseLocked(ctx context.Context, sub *Sub) error {
	key := s.keySlot(sub.MAC)
	if _, err := s.st.Txn().Delete(key).Commit(ctx); err != nil {
		return err
	}
	if err := s.k.Apply(s.changeBatchLocked(sub, nil)); err != nil {
		_, _ = s.st.Txn().Put(key, sub).Commit(ctx)
		return err
	}
	s.logMappingLocked("release", sub)
	s.dropFlows(sub.IP)
	delete(s.subs, sub.MAC)
	delete(s.bySlot, sub.Slot)
	s.alloc.Free(sub.Slot)
	s.pub.Publish(api.EventCGNATReleased, nil, s.sampleLocked(sub))
	s.fillLocked(ctx)
	s.checkFullLocked()
	return nil
}

// fillLocked gives free slots below the capacity first to subscribers
// whose slot lies past it (the pool shrank; lowest slot first), then to
// waiting clients in MAC order.
func (s *Service) fillLocked(ctx context.Context) {
	capacity := s.plan.Capacity()
	var over []*Sub
	for sl, sub := range s.bySlot {
		if sl >= capacity {
			over = append(over, sub)
		}
	}
	sort.Slice(over, func(i, j int) bool { return over[i].Slot < over[j].Slot })
	for _, sub := range over {
		sl, ok := s.alloc.Next(capacity)
		if !ok {
			break
		}
		moved := *sub
		moved.Slot = sl
		if _, err := s.st.Txn().Put(s.keySlot(sub.MAC), moved).Commit(ctx); err != nil {
			s.alloc.Free(sl)
			s.deps.Log.Warn("slot past the capacity not moved", "mac", sub.MAC, "err", err)
			return
		}
		if err := s.k.Apply(s.changeBatchLocked(nil, &moved)); err != nil {
			s.alloc.Free(sl)
			_, _ = s.st.Txn().Put(s.keySlot(sub.MAC), *sub).Commit(ctx)
			s.deps.Log.Warn("slot past the capacity not moved", "mac", sub.MAC, "err", err)
			return
		}
		delete(s.bySlot, sub.Slot)
		s.alloc.Free(sub.Slot)
		*sub = moved
		s.bySlot[sl] = sub
		s.logMappingLocked("assign", sub)
		s.pub.Publish(api.EventCGNATAssigned, nil, s.sampleLocked(sub))
	}
	if len(s.waiting) == 0 {
		return
	}
	macs := make([]string, 0, len(s.waiting))
	for m := range s.waiting {
		macs = append(macs, m)
	}
	sort.Strings(macs)
	for _, m := range macs {
		if err := s.upsertLocked(ctx, s.waiting[m]); err != nil {
			s.deps.Log.Warn("waiting client not given a slot", "mac", m, "err", err)
			return
		}
		if _, still := s.waiting[m]; still {
			return // no free slot left: it waits again
		}
	}
}

// SyncClients brings the slots to the whole list of clients (at start,
// from the subscribers service's pages): new clients get slots in MAC
// order, gone ones are released, changed ones followed. Store writes go in
// transactions of 100; the kernel is then reconciled in one transaction.
func (s *Service) SyncClients(ctx context.Context, clients []api.Client) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[string]api.Client, len(clients))
	touched := s.touched
	s.touched = nil
	// A MAC an event changed after the page was read stays as the event
	// made it: taken as wanted when it has a slot or waits, else left out.
	for mac := range touched {
		if sub := s.subs[mac]; sub != nil {
			want[mac] = api.Client{MAC: mac, IP: sub.IP, Hostname: sub.Hostname, Iface: sub.Iface}
		} else if c, ok := s.waiting[mac]; ok {
			want[mac] = c
		}
	}
	untranslated := map[string]api.Client{}
	for mac, c := range s.untranslated {
		if touched[mac] {
			untranslated[mac] = c
		}
	}
	s.untranslated = untranslated
	for _, c := range clients {
		c.MAC = normMAC(c.MAC)
		if touched[c.MAC] {
			continue
		}
		if s.eligibleLocked(c) {
			want[c.MAC] = c
		} else {
			s.untranslated[c.MAC] = c
		}
	}
	var ops []func(t *txn)
	var released []*Sub
	for mac, sub := range s.subs {
		if _, ok := want[mac]; !ok {
			released = append(released, sub)
			key := s.keySlot(mac)
			ops = append(ops, func(t *txn) { t.Delete(key) })
		}
	}
	macs := make([]string, 0, len(want))
	for m := range want {
		macs = append(macs, m)
	}
	sort.Strings(macs)
	now := s.deps.Now().UTC().Format(timeFormat)
	var assigned, changed []*Sub
	var changedOld []Sub
	var dropped []string
	for _, sub := range released {
		dropped = append(dropped, sub.IP)
	}
	for _, sub := range changedOldIPs(s.subs, want) {
		dropped = append(dropped, sub)
	}
	s.dropFlows(dropped...)
	for _, sub := range released {
		s.logMappingLocked("release", sub)
		delete(s.subs, sub.MAC)
		delete(s.bySlot, sub.Slot)
		s.alloc.Free(sub.Slot)
	}
	s.waiting = map[string]api.Client{}
	for _, m := range macs {
		c := want[m]
		if sub := s.subs[m]; sub != nil {
			if sub.IP != c.IP || sub.Hostname != c.Hostname || sub.Iface != c.Iface {
				changedOld = append(changedOld, *sub)
				sub.IP, sub.Hostname, sub.Iface = c.IP, c.Hostname, c.Iface
				changed = append(changed, sub)
				key, v := s.keySlot(m), *sub
				ops = append(ops, func(t *txn) { t.Put(key, v) })
			}
			continue
		}
		sl, ok := s.alloc.Next(s.plan.Capacity())
		if !ok {
			s.waiting[m] = c
			continue
		}
		sub := &Sub{MAC: m, IP: c.IP, Hostname: c.Hostname, Iface: c.Iface, Slot: sl, Assigned: now}
		s.subs[m], s.bySlot[sl] = sub, sub
		assigned = append(assigned, sub)
		key, v := s.keySlot(m), *sub
		ops = append(ops, func(t *txn) { t.Put(key, v) })
	}
	if err := s.commitChunks(ctx, ops); err != nil {
		return err
	}
	for i, sub := range changed {
		if changedOld[i].IP != sub.IP {
			s.logMappingLocked("release", &changedOld[i])
			s.logMappingLocked("assign", sub)
		}
	}
	for _, sub := range assigned {
		s.logMappingLocked("assign", sub)
	}
	s.clientsOK = true
	// The term's start reconciled the kernel with the store; only what
	// the clients changed needs the kernel again.
	if len(assigned)+len(released)+len(changed) > 0 {
		if _, err := s.reconcileLocked(); err != nil {
			return err
		}
	}
	if len(assigned)+len(released)+len(changed) > 0 {
		s.deps.Log.Info("CGNAT slots synchronised with the clients", "assigned", len(assigned), "released", len(released), "changed", len(changed), "waiting", len(s.waiting))
	}
	s.checkFullLocked()
	return nil
}

// refreshVLANs reads the switched-off VLANs' networks from netcfg and
// re-applies the forwards when they changed.
func (s *Service) refreshVLANs(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := bus.Invoke(c, s.deps.NC, api.VLANsList, &api.None{})
	if err != nil {
		return
	}
	var nets []netip.Prefix
	for _, v := range list.VLANs {
		if v.Enabled {
			continue
		}
		for _, ip := range v.IPs {
			if p, err := netip.ParsePrefix(ip); err == nil {
				nets = append(nets, p.Masked())
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(nets, s.disabledNets) {
		return
	}
	s.disabledNets = nets
	if s.forwards != nil {
		if _, err := s.reconcileLocked(); err != nil {
			s.deps.Log.Warn("forwards not re-applied after a VLAN change", "err", err)
		}
	}
}

// changedOldIPs are the stored addresses of subscribers whose client now
// has another address.
func changedOldIPs(subs map[string]*Sub, want map[string]api.Client) []string {
	var out []string
	for mac, sub := range subs {
		if c, ok := want[mac]; ok && c.IP != sub.IP {
			out = append(out, sub.IP)
		}
	}
	return out
}

// dropFlows deletes the conntrack entries of these private addresses, so
// that flows of a released mapping do not go on with ports of a block
// the audit log now gives to someone else. One pass over the table
// whatever the number of addresses; a failure is logged (the flows then
// end by their timeouts).
func (s *Service) dropFlows(privs ...string) {
	set := srcSet{}
	for _, p := range privs {
		if a, err := netip.ParseAddr(p); err == nil && a.Is4() {
			set[a] = true
		}
	}
	if len(set) == 0 {
		return
	}
	if _, err := s.nl.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, set); err != nil {
		s.deps.Log.Warn("conntrack entries of released mappings not deleted", "err", err, "addresses", len(set))
	}
}

// srcSet matches flows whose original source is one of its addresses.
type srcSet map[netip.Addr]bool

func (f srcSet) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	a, ok := netip.AddrFromSlice(flow.Forward.SrcIP)
	return ok && f[a.Unmap()]
}
