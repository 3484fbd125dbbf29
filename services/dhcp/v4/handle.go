package v4

import (
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"routerd.dev/services/dhcp/lease"
	"routerd.dev/services/dhcp/opt82"
)

// exchange is one request travelling down the handler chain.
type exchange struct {
	c     *compiled
	n     *network
	req   *dhcpv4.DHCPv4
	mac   string
	info  *opt82.Info
	fixed netip.Addr // the only address this client may have, when set
	host  string     // hostname to send (reservations and services)
	now   time.Time
	out   Reply
	resp  *dhcpv4.DHCPv4
	lease *lease.Lease // granted or offered lease
}

// Handle answers one request that arrived on iface. It returns nil when the
// request is to be ignored (not for us, malformed, nothing to offer).
func (s *Server) Handle(iface string, req *dhcpv4.DHCPv4) *Reply {
	if req.OpCode != dhcpv4.OpcodeBootRequest || len(req.ClientHWAddr) != 6 {
		return nil
	}
	s.tab.Lock()
	defer s.tab.Unlock()
	x := &exchange{c: s.cur, req: req, now: s.now()}
	if x.n = x.c.selectNetwork(iface, req.GatewayIPAddr); x.n == nil {
		return nil
	}
	x.mac = strings.ToUpper(req.ClientHWAddr.String())
	if raw := req.Options.Get(dhcpv4.OptionRelayAgentInformation); raw != nil {
		in, err := opt82.Parse(raw)
		if err != nil {
			s.log.Debug("dropping request with malformed option 82", "mac", x.mac, "err", err)
			return nil
		}
		x.info = &in
	}
	x.findFixed()
	var ok bool
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		ok = s.discover(x)
	case dhcpv4.MessageTypeRequest:
		ok = s.request(x)
	case dhcpv4.MessageTypeRelease:
		s.release(x)
		return &x.out
	case dhcpv4.MessageTypeDecline:
		s.decline(x)
		return &x.out
	case dhcpv4.MessageTypeInform:
		ok = s.inform(x)
	}
	if !ok || x.resp == nil {
		if len(x.out.Ops) > 0 || len(x.out.Events) > 0 {
			return &x.out
		}
		return nil
	}
	x.options()
	x.out.Resp = x.resp.ToBytes()
	x.out.Msg = x.resp
	x.out.Dst = x.destination()
	return &x.out
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
		return l.State != lease.Declined && l.MAC == x.mac && l.Iface == x.n.cfg.Iface
	}
	return true
}

func (s *Server) discover(x *exchange) bool {
	ck := lease.ClientKey4(x.n.cfg.Iface, x.mac)
	cur := s.tab.Client(ck)
	var ip netip.Addr
	switch {
	case x.fixed.IsValid():
		if !s.allowed(x, x.fixed) {
			s.log.Warn("fixed address held by another client", "ip", x.fixed, "mac", x.mac)
			return false
		}
		ip = x.fixed
	case cur != nil && s.allowed(x, cur.Addr):
		ip = cur.Addr
	default:
		if r := addr4(x.req.RequestedIPAddress()); r.IsValid() && s.allowed(x, r) {
			ip = r
		} else if i, ok := x.n.pool.Alloc(); ok {
			ip = x.n.pool.Addr(i)
		} else {
			s.log.Warn("pool exhausted", "network", x.n.String(), "mac", x.mac)
			return false
		}
		if cur == nil {
			x.out.Events = append(x.out.Events, Event{Kind: "unknown_device", Lease: lease.Lease{Kind: lease.V4, Iface: x.n.cfg.Iface, MAC: x.mac, Hostname: x.req.HostName(), Addr: ip}})
		}
	}
	l := s.tab.Get(lease.AddrKey(lease.V4, ip))
	if l == nil {
		l = x.newLease(ip, lease.Offered, x.now.Add(x.c.offerHold))
		s.take(x.n, ip)
		s.tab.Put(l)
	}
	x.lease = l
	x.resp = x.reply(dhcpv4.MessageTypeOffer)
	x.resp.YourIPAddr = net.IP(ip.AsSlice())
	return true
}

func (s *Server) request(x *exchange) bool {
	req := x.req
	sid := addr4(req.ServerIdentifier())
	reqIP := addr4(req.RequestedIPAddress())
	ciaddr := addr4(req.ClientIPAddr)
	var ip netip.Addr
	switch {
	case sid.IsValid() && !sid.IsUnspecified(): // SELECTING
		if sid != x.n.cfg.Gateway {
			// The client took another server's offer: let ours go.
			if l := s.tab.Client(lease.ClientKey4(x.n.cfg.Iface, x.mac)); l != nil && l.State == lease.Offered {
				s.drop(l)
			}
			return false
		}
		ip = reqIP
	case reqIP.IsValid() && !reqIP.IsUnspecified(): // INIT-REBOOT
		ip = reqIP
	case ciaddr.IsValid() && !ciaddr.IsUnspecified(): // RENEWING or REBINDING
		ip = ciaddr
	default:
		return false
	}
	if !s.allowed(x, ip) {
		x.resp = x.reply(dhcpv4.MessageTypeNak)
		x.resp.UpdateOption(dhcpv4.OptMessage("address not available"))
		return true
	}
	s.bind(x, ip)
	x.resp = x.reply(dhcpv4.MessageTypeAck)
	x.resp.YourIPAddr = net.IP(ip.AsSlice())
	return true
}

// bind makes ip the client's bound lease and queues its durable write.
func (s *Server) bind(x *exchange, ip netip.Addr) {
	key := lease.AddrKey(lease.V4, ip)
	l := s.tab.Get(key)
	kind := "lease_granted"
	if l != nil && l.State == lease.Bound {
		kind = "lease_renewed"
	}
	if old := s.tab.Client(lease.ClientKey4(x.n.cfg.Iface, x.mac)); old != nil && old.Addr != ip {
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

func (s *Server) release(x *exchange) {
	ip := addr4(x.req.ClientIPAddr)
	l := s.tab.Get(lease.AddrKey(lease.V4, ip))
	if l == nil || l.MAC != x.mac || l.State != lease.Bound {
		return
	}
	s.drop(l)
	x.out.Ops = append(x.out.Ops, lease.Del(l))
	x.out.Events = append(x.out.Events, Event{Kind: "lease_released", Lease: *l})
}

// decline quarantines the address the client found in use on the wire.
func (s *Server) decline(x *exchange) {
	ip := addr4(x.req.RequestedIPAddress())
	l := s.tab.Get(lease.AddrKey(lease.V4, ip))
	if l == nil || l.MAC != x.mac {
		return
	}
	s.tab.Delete(l)
	l.State, l.Start, l.End = lease.Declined, x.now, x.now.Add(x.c.quarantine)
	s.tab.Put(l)
	x.out.Ops = append(x.out.Ops, lease.Put(l))
	x.out.Events = append(x.out.Events, Event{Kind: "lease_declined", Lease: *l})
}

func (s *Server) inform(x *exchange) bool {
	if addr4(x.req.ClientIPAddr).IsUnspecified() {
		return false
	}
	x.resp = x.reply(dhcpv4.MessageTypeAck)
	return true
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
	l := &lease.Lease{Kind: lease.V4, Addr: ip, Iface: x.n.cfg.Iface, MAC: x.mac, State: st, Start: x.now, End: end, Hostname: x.hostname()}
	if x.info != nil {
		l.CircuitID, l.RemoteID = string(x.info.CircuitID), string(x.info.RemoteID)
	}
	return l
}

func (x *exchange) hostname() string {
	if x.host != "" {
		return x.host
	}
	return x.req.HostName()
}

func addr4(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip.To4())
	if !ok || ip.To4() == nil {
		return netip.Addr{}
	}
	return a
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
