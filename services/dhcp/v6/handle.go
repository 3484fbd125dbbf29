package v6

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/services/dhcp/route"
)

type exchange struct {
	c      *compiled
	n      *network
	iface  string
	msg    *dhcpv6.Message // nil on the fast path
	typ    dhcpv6.MessageType
	duid   string
	mac    string
	via    netip.Addr // the client's address: next hop of its delegated prefixes
	commit bool       // bind (REPLY) rather than offer (ADVERTISE)
	now    time.Time
	out    Reply
}

// Handle answers one message that arrived on iface from peer: on the fast
// path when it can, else through the library.
func (s *Server) Handle(iface string, peer *net.UDPAddr, data []byte) *Reply {
	var r fastReq
	if parseFast(data, &r) {
		if rep, ok := s.handleFast(iface, peer, &r); ok {
			return rep
		}
	}
	return s.handleGeneral(iface, peer, data)
}

// handleGeneral answers any message through the library's codec.
func (s *Server) handleGeneral(iface string, peer *net.UDPAddr, data []byte) *Reply {
	d, err := dhcpv6.FromBytes(data)
	if err != nil {
		return nil
	}
	var relay *dhcpv6.RelayMessage
	var linkAddr net.IP
	via, _ := netip.AddrFromSlice(peer.IP)
	if d.IsRelay() {
		relay = d.(*dhcpv6.RelayMessage)
		inner, err := dhcpv6.DecapsulateRelayIndex(d, -1)
		if err != nil {
			return nil
		}
		if r, ok := inner.(*dhcpv6.RelayMessage); ok {
			linkAddr = r.LinkAddr
			via, _ = netip.AddrFromSlice(r.PeerAddr)
		}
		for i := 0; i < 32 && inner.IsRelay(); i++ {
			if inner, err = dhcpv6.DecapsulateRelay(inner); err != nil {
				return nil
			}
		}
		if inner.IsRelay() {
			return nil
		}
		if linkAddr == nil {
			linkAddr = relay.LinkAddr
		}
		d = inner
	}
	msg, ok := d.(*dhcpv6.Message)
	if !ok {
		return nil
	}
	cid := msg.Options.ClientID()
	if cid == nil {
		return nil
	}
	s.tab.Lock()
	defer s.tab.Unlock()
	x := &exchange{c: s.cur, iface: iface, msg: msg, typ: msg.MessageType, duid: duidString(cid), mac: s.clientMAC(cid, via, msg, relay), via: via.Unmap(), now: s.now()}
	na, pd := iaReqs(msg)
	if la, ok := netip.AddrFromSlice(linkAddr); ok && !la.IsUnspecified() {
		for _, n := range x.c.nets {
			if n.cfg.Prefix.Contains(la) && !n.suspended {
				x.n = n
			}
		}
	} else {
		x.n = x.c.byIface[iface]
	}
	if x.n == nil {
		return nil
	}
	if sid := msg.Options.ServerID(); sid != nil && !sid.Equal(s.serverID) {
		return nil // addressed to another server
	}
	hasSID := msg.Options.ServerID() != nil
	var resp *dhcpv6.Message
	switch msg.MessageType {
	case dhcpv6.MessageTypeSolicit:
		if hasSID {
			return nil
		}
		if msg.GetOneOption(dhcpv6.OptionRapidCommit) != nil {
			x.commit = true
			resp, err = dhcpv6.NewReplyFromMessage(msg)
		} else {
			resp, err = dhcpv6.NewAdvertiseFromSolicit(msg)
		}
		if err == nil {
			addIAs(resp, s.assign(x, na, pd))
		}
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew:
		if !hasSID {
			return nil
		}
		x.commit = true
		if resp, err = dhcpv6.NewReplyFromMessage(msg); err == nil {
			addIAs(resp, s.assign(x, na, pd))
		}
	case dhcpv6.MessageTypeRebind:
		if hasSID {
			return nil
		}
		x.commit = true
		if resp, err = dhcpv6.NewReplyFromMessage(msg); err == nil {
			addIAs(resp, s.assign(x, na, pd))
		}
	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		if !hasSID {
			return nil
		}
		if resp, err = newReply(msg); err == nil {
			s.releaseOrDecline(x, msg.MessageType == dhcpv6.MessageTypeDecline)
			resp.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess})
		}
	case dhcpv6.MessageTypeConfirm:
		if resp, err = dhcpv6.NewReplyFromMessage(msg); err == nil && !s.confirm(x, resp) {
			return nil
		}
	case dhcpv6.MessageTypeInformationRequest:
		resp, err = dhcpv6.NewReplyFromMessage(msg)
	default:
		return nil
	}
	if err != nil || resp == nil {
		return nil
	}
	resp.AddOption(dhcpv6.OptServerID(s.serverID))
	if len(x.n.dns) > 0 {
		resp.AddOption(dhcpv6.OptDNS(x.n.dns...))
	}
	if len(x.c.domains) > 0 {
		dhcpv6.WithDomainSearchList(x.c.domains...)(resp)
	}
	x.out.Msg = resp
	if relay != nil {
		rr, err := dhcpv6.NewRelayReplFromRelayForw(relay, resp)
		if err != nil {
			return nil
		}
		x.out.Resp = rr.ToBytes()
		x.out.Dst = &net.UDPAddr{IP: peer.IP, Port: dhcpv6.DefaultServerPort, Zone: peer.Zone}
	} else {
		x.out.Resp = resp.ToBytes()
		x.out.Dst = &net.UDPAddr{IP: peer.IP, Port: dhcpv6.DefaultClientPort, Zone: peer.Zone}
	}
	return &x.out
}

// newReply builds a REPLY to RELEASE or DECLINE, which the library's
// constructor does not cover for DECLINE.
func newReply(msg *dhcpv6.Message) (*dhcpv6.Message, error) {
	r := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: msg.TransactionID}
	r.AddOption(msg.GetOneOption(dhcpv6.OptionClientID))
	return r, nil
}

// iaReq is one IA_NA or IA_PD of a request: its IAID and the client's
// hint (the first address or prefix it lists), whichever codec read it.
type iaReq struct {
	id     [4]byte
	addr   netip.Addr   // IA_NA hint
	prefix netip.Prefix // IA_PD hint
}

// iaResult is the answer to one IA, whichever codec writes it.
type iaResult struct {
	pd          bool
	id          [4]byte
	ok          bool
	addr        netip.Addr   // IA_NA address given
	prefix      netip.Prefix // IA_PD prefix given
	zero        netip.Addr   // an address the client may no longer use (zero lifetimes)
	pref, valid time.Duration
}

// iaReqs reads the IAs of a message decoded by the library.
func iaReqs(m *dhcpv6.Message) (na, pd []iaReq) {
	for _, ia := range m.Options.IANA() {
		r := iaReq{id: ia.IaId}
		if a := ia.Options.OneAddress(); a != nil {
			r.addr, _ = netip.AddrFromSlice(a.IPv6Addr)
		}
		na = append(na, r)
	}
	for _, ia := range m.Options.IAPD() {
		r := iaReq{id: ia.IaId}
		if ps := ia.Options.Prefixes(); len(ps) > 0 && ps[0].Prefix != nil {
			a, _ := netip.AddrFromSlice(ps[0].Prefix.IP)
			ones, _ := ps[0].Prefix.Mask.Size()
			r.prefix = netip.PrefixFrom(a.Unmap(), ones)
		}
		pd = append(pd, r)
	}
	return na, pd
}

// assign answers every IA_NA and then every IA_PD of a SOLICIT, REQUEST,
// RENEW or REBIND.
func (s *Server) assign(x *exchange, na, pd []iaReq) []iaResult {
	out := make([]iaResult, 0, len(na)+len(pd))
	for _, ia := range na {
		r := iaResult{id: ia.id}
		iaid := binary.BigEndian.Uint32(ia.id[:])
		if a, left, ok := s.address(x, iaid, ia.addr); ok {
			r.ok, r.addr = true, a
			r.pref, r.valid = x.lifetimes(left)
			if ia.addr.IsValid() && ia.addr != a && x.typ != dhcpv6.MessageTypeSolicit {
				// RFC 8415 18.3.4: an address the client may no longer use
				// comes back with zero lifetimes.
				r.zero = ia.addr
			}
		}
		out = append(out, r)
	}
	for _, ia := range pd {
		r := iaResult{pd: true, id: ia.id}
		iaid := binary.BigEndian.Uint32(ia.id[:])
		if p, left, ok := s.prefix(x, iaid, ia.prefix); ok {
			r.ok, r.prefix = true, p
			r.pref, r.valid = x.lifetimes(left)
		}
		out = append(out, r)
	}
	return out
}

// addIAs renders IA results as library options (the general path).
func addIAs(resp *dhcpv6.Message, res []iaResult) {
	for _, r := range res {
		t1, t2 := r.pref/2, r.pref*4/5
		if !r.ok {
			t1, t2 = 0, 0
		}
		if !r.pd {
			out := &dhcpv6.OptIANA{IaId: r.id, T1: t1, T2: t2}
			if r.ok {
				out.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: r.addr.AsSlice(), PreferredLifetime: r.pref, ValidLifetime: r.valid})
				if r.zero.IsValid() {
					out.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: r.zero.AsSlice()})
				}
			} else {
				out.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail, StatusMessage: noAddrs})
			}
			resp.AddOption(out)
			continue
		}
		out := &dhcpv6.OptIAPD{IaId: r.id, T1: t1, T2: t2}
		if r.ok {
			out.Options.Add(&dhcpv6.OptIAPrefix{PreferredLifetime: r.pref, ValidLifetime: r.valid,
				Prefix: &net.IPNet{IP: r.prefix.Addr().AsSlice(), Mask: net.CIDRMask(r.prefix.Bits(), 128)}})
		} else {
			out.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoPrefixAvail, StatusMessage: noPrefixes})
		}
		resp.AddOption(out)
	}
}

const (
	noAddrs    = "no addresses available"
	noPrefixes = "no prefixes available"
)

// lifetimes are the preferred and valid lifetimes to give: the configured
// ones, or, for a lease answered from the cache with left to run, what is
// left of each.
func (x *exchange) lifetimes(left time.Duration) (pref, valid time.Duration) {
	if left <= 0 {
		return x.c.preferred, x.c.valid
	}
	return max(0, x.c.preferred-(x.c.valid-left)), left
}

// address picks and (when committing) binds the IA_NA address of one IA.
func (s *Server) address(x *exchange, iaid uint32, hint netip.Addr) (netip.Addr, time.Duration, bool) {
	ck := lease.ClientKey6(lease.NA, x.n.cfg.Iface, x.duid, iaid)
	cur := s.tab.Client(ck)
	var a netip.Addr
	fixed, hasFixed := x.c.fixed[x.mac]
	switch {
	case hasFixed && x.n.cfg.Prefix.Contains(fixed):
		if l := s.tab.Get(lease.AddrKey(lease.NA, fixed)); l != nil && l.ClientKey() != ck {
			return netip.Addr{}, 0, false
		}
		a = fixed
	case cur != nil && cur.State != lease.Declined && x.n.pool.Contains(cur.Addr):
		a = cur.Addr
	case hint.IsValid() && x.n.pool.Contains(hint) && !x.c.fixedSet[hint] && s.tab.Get(lease.AddrKey(lease.NA, hint)) == nil:
		a = hint
		s.take(&lease.Lease{Kind: lease.NA, Addr: a})
	default:
		i, ok := x.n.pool.Alloc()
		if !ok {
			return netip.Addr{}, 0, false
		}
		a = x.n.pool.Addr(i)
	}
	l := &lease.Lease{Kind: lease.NA, Addr: a, Iface: x.n.cfg.Iface, DUID: x.duid, IAID: iaid, MAC: x.mac,
		Hostname: x.c.hostByMAC[x.mac], Via: x.via}
	return a, s.record(x, cur, l), true
}

// prefix picks and (when committing) binds the delegated prefix of one IA_PD.
func (s *Server) prefix(x *exchange, iaid uint32, hint netip.Prefix) (netip.Prefix, time.Duration, bool) {
	c := x.c
	if !c.pdPool.IsValid() {
		return netip.Prefix{}, 0, false
	}
	ck := lease.ClientKey6(lease.PD, x.n.cfg.Iface, x.duid, iaid)
	cur := s.tab.Client(ck)
	var p netip.Prefix
	inSlice := func(q netip.Prefix) (uint64, bool) {
		if x.n.slice == nil || q.Bits() != c.pdLen || !c.pdPool.Contains(q.Addr()) || q.Masked() != q {
			return 0, false
		}
		idx := config.PrefixIndex(c.pdPool, c.pdLen, q)
		return idx - x.n.first, idx >= x.n.first && idx < x.n.first+x.n.slice.Len()
	}
	if pin, ok := c.pinned[x.mac]; ok {
		if l := s.tab.Get(lease.PrefixKey(pin)); l != nil && l.ClientKey() != ck {
			return netip.Prefix{}, 0, false
		}
		p = pin
	} else if cur != nil && cur.State != lease.Declined {
		p = cur.Prefix()
	} else if i, ok := inSlice(hint); ok && s.tab.Get(lease.PrefixKey(hint)) == nil && x.n.slice.Set(i) {
		p = hint
	} else if x.n.slice != nil {
		i, ok := x.n.slice.Alloc()
		if !ok {
			return netip.Prefix{}, 0, false
		}
		p = config.PrefixAt(c.pdPool, c.pdLen, x.n.first+i)
	} else {
		return netip.Prefix{}, 0, false
	}
	l := &lease.Lease{Kind: lease.PD, Addr: p.Addr(), PrefixLen: p.Bits(), Iface: x.n.cfg.Iface, DUID: x.duid, IAID: iaid,
		MAC: x.mac, Hostname: c.hostByMAC[x.mac], Via: x.via}
	return p, s.record(x, cur, l), true
}

// record stores l as offered or bound, replacing the client's previous
// binding of that IA when the address moved. It returns the lifetime left
// when a renewal is answered from the cache (no write), else 0.
func (s *Server) record(x *exchange, cur, l *lease.Lease) time.Duration {
	existing := s.tab.Get(l.Key())
	if x.commit && existing != nil && existing == cur && existing.Via == l.Via && existing.Hostname == l.Hostname && existing.MAC == l.MAC {
		if left, ok := lease.Cached(existing, x.c.valid, x.c.cache, x.now); ok {
			return left
		}
	}
	if cur != nil && cur.Key() != l.Key() {
		s.drop(cur)
		if cur.State == lease.Bound && x.commit {
			x.out.Ops = append(x.out.Ops, lease.Del(cur))
			if cur.Kind == lease.PD {
				x.out.RouteDel = append(x.out.RouteDel, cur.Prefix())
			}
		}
	}
	if !x.commit {
		if existing == nil {
			l.State, l.Start, l.End = lease.Offered, x.now, x.now.Add(x.c.offerHold)
			s.tab.Put(l)
		}
		return 0
	}
	kind := "lease_granted"
	l.Start = x.now
	if existing != nil && existing.State == lease.Bound {
		kind, l.Start = "lease_renewed", existing.Start
	}
	l.State, l.End = lease.Bound, x.now.Add(x.c.valid)
	if existing != nil {
		s.tab.Delete(existing)
	}
	s.tab.Put(l)
	s.take(l)
	x.out.Ops = append(x.out.Ops, lease.Put(l))
	x.out.Events = append(x.out.Events, lease.Event{Kind: kind, Lease: *l})
	if l.Kind == lease.PD && l.Via.IsValid() {
		x.out.RouteAdd = append(x.out.RouteAdd, route.Want{Prefix: l.Prefix(), Via: l.Via, Iface: l.Iface})
	}
	return 0
}

func (s *Server) drop(l *lease.Lease) {
	s.tab.Delete(l)
	s.mark(l, false)
}

func (s *Server) releaseOrDecline(x *exchange, decline bool) {
	var leases []*lease.Lease
	for _, ia := range x.msg.Options.IANA() {
		for _, a := range ia.Options.Addresses() {
			ip, _ := netip.AddrFromSlice(a.IPv6Addr)
			leases = append(leases, s.tab.Get(lease.AddrKey(lease.NA, ip)))
		}
	}
	for _, ia := range x.msg.Options.IAPD() {
		for _, p := range ia.Options.Prefixes() {
			if p.Prefix == nil || decline {
				continue
			}
			a, _ := netip.AddrFromSlice(p.Prefix.IP)
			ones, _ := p.Prefix.Mask.Size()
			leases = append(leases, s.tab.Get(lease.PrefixKey(netip.PrefixFrom(a, ones))))
		}
	}
	for _, l := range leases {
		if l == nil || l.DUID != x.duid || l.State != lease.Bound {
			continue
		}
		if decline {
			s.tab.Delete(l)
			l.State, l.Start, l.End = lease.Declined, x.now, x.now.Add(x.c.quarant)
			s.tab.Put(l)
			x.out.Ops = append(x.out.Ops, lease.Put(l))
			x.out.Events = append(x.out.Events, lease.Event{Kind: "lease_declined", Lease: *l})
			continue
		}
		s.drop(l)
		x.out.Ops = append(x.out.Ops, lease.Del(l))
		x.out.Events = append(x.out.Events, lease.Event{Kind: "lease_released", Lease: *l})
		if l.Kind == lease.PD {
			x.out.RouteDel = append(x.out.RouteDel, l.Prefix())
		}
	}
}

// confirm answers CONFIRM: Success when every address is on-link, else
// NotOnLink; false (no answer) when the message carries no address.
func (s *Server) confirm(x *exchange, resp *dhcpv6.Message) bool {
	any := false
	for _, ia := range x.msg.Options.IANA() {
		for _, a := range ia.Options.Addresses() {
			any = true
			ip, _ := netip.AddrFromSlice(a.IPv6Addr)
			if !x.n.cfg.Prefix.Contains(ip) {
				resp.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNotOnLink, StatusMessage: "not on link"})
				return true
			}
		}
	}
	if any {
		resp.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess})
	}
	return any
}

// Reclaim removes every DHCPv6 lease whose end has passed, returning the
// deletes, lease_expired events and routes to withdraw.
func (s *Server) Reclaim(now time.Time) (ops []lease.Op, events []lease.Event, dels []netip.Prefix) {
	s.tab.Lock()
	defer s.tab.Unlock()
	var dead []*lease.Lease
	s.tab.Each(func(l *lease.Lease) {
		if (l.Kind == lease.NA || l.Kind == lease.PD) && l.End.Before(now) {
			dead = append(dead, l)
		}
	})
	for _, l := range dead {
		s.drop(l)
		if l.State == lease.Offered {
			continue
		}
		ops = append(ops, lease.Del(l))
		if l.State == lease.Bound {
			events = append(events, lease.Event{Kind: "lease_expired", Lease: *l})
			if l.Kind == lease.PD {
				dels = append(dels, l.Prefix())
			}
		}
	}
	return ops, events, dels
}

// Routes returns the delegated routes the bound PD leases want.
func (s *Server) Routes() []route.Want {
	s.tab.Lock()
	defer s.tab.Unlock()
	var out []route.Want
	s.tab.Each(func(l *lease.Lease) {
		if l.Kind == lease.PD && l.State == lease.Bound && l.Via.IsValid() {
			out = append(out, route.Want{Prefix: l.Prefix(), Via: l.Via, Iface: l.Iface})
		}
	})
	return out
}
