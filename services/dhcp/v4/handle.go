package v4

import (
	"encoding/hex"
	"net/netip"
	"time"

	"routerd.dev/services/dhcp/lease"
	"routerd.dev/services/dhcp/opt82"
)

// exchange is one request travelling down the handler chain.
type exchange struct {
	c      *compiled
	n      *network
	req    request
	raw    []byte // the request datagram
	mac    string
	cid    string // option 61 in hex, when the client sent one
	info   *opt82.Info
	fixed  netip.Addr // the only address this client may have, when set
	host   string     // hostname to send (reservations and services)
	now    time.Time
	out    *Reply
	typ    byte          // message type of the answer; 0 is none
	yiaddr netip.Addr    // address given to the client
	nakMsg string        // option 56 of a NAK
	lease  *lease.Lease  // granted or offered lease
	left   time.Duration // lease time to give when answering from the cache; 0 is the full time
}

// Handle answers one request datagram that arrived on iface. It returns nil
// when the request is to be ignored (not for us, malformed, nothing to
// offer). b is only read during the call.
func (s *Server) Handle(iface string, b []byte) *Reply {
	rep := new(Reply)
	if !s.HandleInto(iface, b, rep) {
		return nil
	}
	return rep
}

// HandleInto is Handle writing into rep, whose buffers it reuses (the
// receive loop keeps one Reply per batch slot, so answering allocates
// almost nothing); it reports whether there is anything to send, write or
// publish.
func (s *Server) HandleInto(iface string, b []byte, rep *Reply) bool {
	rep.reset()
	x := exchange{raw: b, out: rep}
	if parse(b, &x.req) != nil {
		return false
	}
	return s.handle(iface, &x)
}

func (s *Server) handle(iface string, x *exchange) bool {
	req := &x.req
	if req.op != 1 || req.htype != 1 || req.hlen != 6 {
		return false
	}
	s.tab.Lock()
	defer s.tab.Unlock()
	x.c, x.now = s.cur, s.now()
	if x.n = x.c.selectNetwork(iface, req.giaddr); x.n == nil {
		return false
	}
	x.mac = macString(req.chaddr)
	if len(req.clientID) > 0 {
		x.cid = hex.EncodeToString(req.clientID)
	}
	if raw := req.relay; raw != nil {
		in, err := opt82.Parse(raw)
		if err != nil {
			s.log.Debug("dropping request with malformed option 82", "mac", x.mac, "err", err)
			return false
		}
		x.info = &in
	}
	x.findFixed()
	switch req.msgType {
	case msgDiscover:
		s.discover(x)
	case msgRequest:
		s.request(x)
	case msgRelease:
		s.release(x)
	case msgDecline:
		s.decline(x)
	case msgInform:
		s.inform(x)
	}
	if x.typ == 0 {
		return len(x.out.Ops) > 0 || len(x.out.Events) > 0
	}
	x.out.Resp = x.encode(x.out.Resp[:0])
	x.out.Dst = x.destination()
	return true
}

// macString is the stored form of a MAC: upper-case hex with colons.
func macString(m [6]byte) string {
	const digits = "0123456789ABCDEF"
	var b [17]byte
	for i, v := range m {
		if i > 0 {
			b[3*i-1] = ':'
		}
		b[3*i], b[3*i+1] = digits[v>>4], digits[v&15]
	}
	return string(b[:])
}

// sameClient reports whether l belongs to the requesting client: by client
// identifier when the client sends one (RFC 2131 4.2, RFC 6842), else by
// hardware address.
func (x *exchange) sameClient(l *lease.Lease) bool {
	if l.ClientID != x.cid || l.Iface != x.n.cfg.Iface {
		return false
	}
	return x.cid != "" || l.MAC == x.mac
}

// clientKey is the table's key for the requesting client's binding.
func (x *exchange) clientKey() string {
	return lease.ClientKey4(x.n.cfg.Iface, x.mac, x.cid)
}

// findFixed applies the option 82 lookup, then the MAC reservation.
func (x *exchange) findFixed() {
	if x.info != nil && x.c.opt82 {
		if m, ok := x.c.lookup.Lookup(x.info.CircuitID, x.info.RemoteID); ok && x.n.cfg.Prefix.Contains(m.IPv4) {
			x.fixed, x.host = m.IPv4, m.Hostname
			return
		}
	}
	if r, ok := x.c.byMAC[x.mac]; ok && x.n.cfg.Prefix.Contains(r.IP) {
		x.fixed, x.host = r.IP, r.Hostname
	}
}

// allowed reports whether ip may be bound to this client now.
func (s *Server) allowed(x *exchange, ip netip.Addr) bool {
	if !ip.Is4() || !x.n.cfg.Prefix.Contains(ip) {
		return false
	}
	if x.fixed.IsValid() {
		if ip != x.fixed {
			return false
		}
	} else if !x.n.pool.Contains(ip) || x.c.fixedIPs[ip] {
		return false
	}
	if l := s.tab.Get(lease.AddrKey(lease.V4, ip)); l != nil {
		return l.State != lease.Declined && x.sameClient(l)
	}
	return true
}

func (s *Server) discover(x *exchange) {
	cur := s.tab.Client(x.clientKey())
	var ip netip.Addr
	switch {
	case x.fixed.IsValid():
		if !s.allowed(x, x.fixed) {
			s.log.Warn("fixed address held by another client", "ip", x.fixed, "mac", x.mac)
			return
		}
		ip = x.fixed
	case cur != nil && s.allowed(x, cur.Addr):
		ip = cur.Addr
	default:
		if r := x.req.requested; r.IsValid() && s.allowed(x, r) {
			ip = r
		} else if i, ok := x.n.pool.Alloc(); ok {
			ip = x.n.pool.Addr(i)
		} else {
			s.log.Warn("pool exhausted", "network", x.n.String(), "mac", x.mac)
			return
		}
		if cur == nil {
			x.out.Events = append(x.out.Events, Event{Kind: "unknown_device", Lease: lease.Lease{Kind: lease.V4, Iface: x.n.cfg.Iface, MAC: x.mac, ClientID: x.cid, Hostname: string(x.req.hostname), Addr: ip}})
		}
	}
	l := s.tab.Get(lease.AddrKey(lease.V4, ip))
	if l == nil {
		l = x.newLease(ip, lease.Offered, x.now.Add(x.c.offerHold))
		s.take(x.n, ip)
		s.tab.Put(l)
	}
	x.lease = l
	x.typ, x.yiaddr = msgOffer, ip
}

func (s *Server) request(x *exchange) {
	req := &x.req
	var ip netip.Addr
	switch {
	case req.serverID.IsValid(): // SELECTING
		if req.serverID != x.n.cfg.Gateway {
			// The client took another server's offer: let ours go.
			if l := s.tab.Client(x.clientKey()); l != nil && l.State == lease.Offered {
				s.drop(l)
			}
			return
		}
		ip = req.requested
	case req.requested.IsValid(): // INIT-REBOOT
		ip = req.requested
	case req.ciaddr.IsValid(): // RENEWING or REBINDING
		ip = req.ciaddr
	default:
		return
	}
	if !s.allowed(x, ip) {
		x.typ, x.nakMsg = msgNak, "address not available"
		return
	}
	s.bind(x, ip)
	x.typ, x.yiaddr = msgAck, ip
}

// bind makes ip the client's bound lease and queues its durable write.
func (s *Server) bind(x *exchange, ip netip.Addr) {
	key := lease.AddrKey(lease.V4, ip)
	l := s.tab.Get(key)
	if x.cached(l) {
		return
	}
	kind := "lease_granted"
	if l != nil && l.State == lease.Bound {
		kind = "lease_renewed"
	}
	if old := s.tab.Client(x.clientKey()); old != nil && old.Addr != ip {
		// The client moved to another address: free the old one.
		if old.State == lease.Bound {
			x.out.Ops = append(x.out.Ops, lease.Del(old))
		}
		s.drop(old)
	}
	if l == nil {
		s.take(x.n, ip)
		l = x.newLease(ip, lease.Bound, time.Time{})
	}
	l.State = lease.Bound
	if l.Start.IsZero() || kind == "lease_granted" {
		l.Start = x.now
	}
	l.End = x.now.Add(time.Duration(x.n.lease) * time.Second)
	if h := x.hostname(); h != "" {
		l.Hostname = h
	}
	if x.info != nil {
		l.CircuitID, l.RemoteID = string(x.info.CircuitID), string(x.info.RemoteID)
	}
	s.tab.Put(l)
	x.lease = l
	x.out.Ops = append(x.out.Ops, lease.Put(l))
	x.out.Events = append(x.out.Events, Event{Kind: kind, Lease: *l})
}

// cached reports whether the client's renewal of l is answered from the
// durable lease without a write (config.Timers.CacheThreshold): same
// client, nothing recorded with the lease has changed, and the lease was
// written recently enough.
func (x *exchange) cached(l *lease.Lease) bool {
	if l == nil || !x.sameClient(l) || l.MAC != x.mac {
		return false
	}
	if h := x.hostname(); h != "" && h != l.Hostname {
		return false
	}
	if x.info != nil && (string(x.info.CircuitID) != l.CircuitID || string(x.info.RemoteID) != l.RemoteID) {
		return false
	}
	left, ok := lease.Cached(l, time.Duration(x.n.lease)*time.Second, x.c.cache, x.now)
	if ok {
		x.lease, x.left = l, left
	}
	return ok
}

func (s *Server) release(x *exchange) {
	l := s.tab.Get(lease.AddrKey(lease.V4, x.req.ciaddr))
	if l == nil || !x.sameClient(l) || l.State != lease.Bound {
		return
	}
	s.drop(l)
	x.out.Ops = append(x.out.Ops, lease.Del(l))
	x.out.Events = append(x.out.Events, Event{Kind: "lease_released", Lease: *l})
}

// decline quarantines the address the client found in use on the wire.
func (s *Server) decline(x *exchange) {
	l := s.tab.Get(lease.AddrKey(lease.V4, x.req.requested))
	if l == nil || !x.sameClient(l) {
		return
	}
	s.tab.Delete(l)
	l.State, l.Start, l.End = lease.Declined, x.now, x.now.Add(x.c.quarantine)
	s.tab.Put(l)
	x.out.Ops = append(x.out.Ops, lease.Put(l))
	x.out.Events = append(x.out.Events, Event{Kind: "lease_declined", Lease: *l})
}

func (s *Server) inform(x *exchange) {
	if x.req.ciaddr.IsValid() {
		x.typ = msgAck
	}
}

func (s *Server) take(n *network, ip netip.Addr) {
	if i, ok := n.pool.Index(ip); ok {
		n.pool.Set(i)
	}
}

// drop removes a lease from memory and frees its pool slot (fixed
// addresses stay out of the pool).
func (s *Server) drop(l *lease.Lease) {
	s.tab.Delete(l)
	if s.cur.fixedIPs[l.Addr] {
		return
	}
	for _, nn := range s.cur.nets {
		if i, ok := nn.pool.Index(l.Addr); ok {
			nn.pool.Clear(i)
		}
	}
}

func (x *exchange) newLease(ip netip.Addr, st lease.State, end time.Time) *lease.Lease {
	l := &lease.Lease{Kind: lease.V4, Addr: ip, Iface: x.n.cfg.Iface, MAC: x.mac, ClientID: x.cid, State: st, Start: x.now, End: end, Hostname: x.hostname()}
	if x.info != nil {
		l.CircuitID, l.RemoteID = string(x.info.CircuitID), string(x.info.RemoteID)
	}
	return l
}

func (x *exchange) hostname() string {
	if x.host != "" {
		return x.host
	}
	return string(x.req.hostname)
}

// Reclaim removes every IPv4 lease whose end has passed: offers quietly,
// bound leases with a delete and a lease_expired event, quarantined
// addresses with a delete.
func (s *Server) Reclaim(now time.Time) (ops []lease.Op, events []Event) {
	s.tab.Lock()
	defer s.tab.Unlock()
	var dead []*lease.Lease
	s.tab.Each(func(l *lease.Lease) {
		if l.Kind == lease.V4 && l.End.Before(now) {
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
			events = append(events, Event{Kind: "lease_expired", Lease: *l})
		}
	}
	return ops, events
}
