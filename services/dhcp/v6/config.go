// Package v6 is the DHCPv6 server logic: IA_NA addresses from a pool derived
// from each served network or fixed per client, IA_PD prefixes from the
// interface's slice of the router-wide delegation pool, DNS and domain
// list, rapid commit, relayed and direct messages. Like package v4 it turns
// one request into one answer plus the lease writes (and delegated routes)
// that follow, and knows nothing of sockets.
package v6

import (
	"encoding/hex"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/services/dhcp/pool"
	"routerd.dev/services/dhcp/route"
)

// Reply is what Handle decided.
type Reply struct {
	Resp   []byte
	Dst    *net.UDPAddr
	Ops    []lease.Op
	Events []lease.Event
	// RouteAdd and RouteDel are delegated routes to install or withdraw
	// once Ops are durable.
	RouteAdd []route.Want
	RouteDel []netip.Prefix
	Msg      dhcpv6.DHCPv6
}

type network struct {
	cfg   config.Network6
	pool  *pool.Range
	slice *pool.Bitmap // PD slice, nil when the interface has none
	first uint64       // index of the slice's first prefix in the PD pool
	dns   []net.IP
	// dnsTLV is option 23 with dns, as written on every answer.
	dnsTLV []byte
	// suspended: nothing is answered for this network (config.Suspended),
	// relayed or not; its pools and leases stay.
	suspended bool
}

type compiled struct {
	byIface   map[string]*network
	nets      []*network
	fixed     map[string]netip.Addr // MAC -> fixed IPv6
	fixedSet  map[netip.Addr]bool
	hostByMAC map[string]string
	pinned    map[string]netip.Prefix // MAC -> pinned prefix
	pinnedSet map[netip.Prefix]bool
	pdPool    netip.Prefix
	pdLen     int
	valid     time.Duration
	preferred time.Duration
	domains   []string
	quarant   time.Duration
	offerHold time.Duration
	cache     float64 // lease cache threshold, see config.Timers
	domainTLV []byte  // option 24, as written on every answer
}

// Server answers DHCPv6 on every served IPv6 network.
type Server struct {
	tab      *lease.Table
	now      func() time.Time
	log      *slog.Logger
	serverID dhcpv6.DUID
	sidBytes []byte    // serverID as on the wire
	sidTLV   []byte    // option 2 carrying it
	cur      *compiled // guarded by tab's lock
}

// Deps are what the server needs from the engine.
type Deps struct {
	Table *lease.Table
	// ServerID is the server's DUID; the engine makes a DUID-LL from a
	// served interface's MAC.
	ServerID dhcpv6.DUID
	Now      func() time.Time
	Log      *slog.Logger
}

// New returns a server for cfg (already defaulted and validated).
func New(cfg config.Config, d Deps) (*Server, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.ServerID == nil {
		d.ServerID = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	}
	s := &Server{tab: d.Table, now: d.Now, log: d.Log, serverID: d.ServerID,
		sidBytes: d.ServerID.ToBytes(), sidTLV: tlv(dhcpv6.OptServerID(d.ServerID))}
	s.tab.Lock()
	defer s.tab.Unlock()
	s.reconfigureLocked(cfg)
	return s, nil
}

// Reconfigure swaps in cfg (already validated) keeping every lease.
func (s *Server) Reconfigure(cfg config.Config) error {
	s.tab.Lock()
	defer s.tab.Unlock()
	s.reconfigureLocked(cfg)
	return nil
}

func (s *Server) reconfigureLocked(cfg config.Config) {
	c := &compiled{
		byIface: map[string]*network{}, fixed: map[string]netip.Addr{}, fixedSet: map[netip.Addr]bool{},
		hostByMAC: map[string]string{}, pinned: map[string]netip.Prefix{}, pinnedSet: map[netip.Prefix]bool{},
		pdPool: cfg.PD.Pool, pdLen: cfg.PD.Len, valid: cfg.Lifetimes6.Valid, preferred: cfg.Lifetimes6.Preferred,
		quarant: cfg.Timers.Quarantine, offerHold: cfg.Timers.OfferHold,
		cache: cfg.Timers.CacheThreshold,
	}
	if cfg.DNS.Domain != "" {
		c.domains = []string{cfg.DNS.Domain}
		m := &dhcpv6.Message{}
		dhcpv6.WithDomainSearchList(c.domains...)(m)
		c.domainTLV = m.ToBytes()[4:]
	}
	for _, cl := range cfg.Clients {
		m, _ := config.NormalizeMAC(cl.MAC)
		h := cl.Hostname
		if h == "" {
			h = config.DefaultHostname(m)
		}
		c.hostByMAC[m] = h
		if cl.IPv6.IsValid() {
			c.fixed[m] = cl.IPv6
			c.fixedSet[cl.IPv6] = true
		}
	}
	for _, p := range cfg.PD.Pinned {
		m, _ := config.NormalizeMAC(p.MAC)
		c.pinned[m] = p.Prefix
		c.pinnedSet[p.Prefix] = true
	}
	for _, nc := range cfg.Networks6 {
		first, last, _ := nc.Pool()
		n := &network{cfg: nc, pool: pool.NewRange(first, last)}
		dns := cfg.DNS.V6
		if o, ok := cfg.DNS.PerIface[nc.Iface]; ok && len(o.V6) > 0 {
			dns = o.V6
		}
		for _, a := range dns {
			n.dns = append(n.dns, net.IP(a.AsSlice()))
		}
		if len(n.dns) > 0 {
			n.dnsTLV = tlv(dhcpv6.OptDNS(n.dns...))
		}
		if sl, ok := cfg.PD.Slices[nc.Iface]; ok && cfg.PD.Pool.IsValid() {
			n.slice, n.first = pool.NewBitmap(uint64(sl.Size)), uint64(sl.Index)
		}
		for a := range c.fixedSet {
			if i, ok := n.pool.Index(a); ok {
				n.pool.Set(i)
			}
		}
		_, n.suspended = cfg.Suspended[nc.Iface]
		c.nets = append(c.nets, n)
		if !n.suspended {
			c.byIface[nc.Iface] = n
		}
	}
	s.cur = c
	s.tab.Each(func(l *lease.Lease) { s.take(l) })
}

// take marks a lease's address or prefix used in whichever pool holds it.
func (s *Server) take(l *lease.Lease) {
	s.mark(l, true)
}

func (s *Server) mark(l *lease.Lease, used bool) {
	c := s.cur
	for _, n := range c.nets {
		switch l.Kind {
		case lease.NA:
			if i, ok := n.pool.Index(l.Addr); ok && !c.fixedSet[l.Addr] {
				if used {
					n.pool.Set(i)
				} else {
					n.pool.Clear(i)
				}
			}
		case lease.PD:
			if n.slice == nil || !c.pdPool.IsValid() || !c.pdPool.Contains(l.Addr) || l.PrefixLen != c.pdLen {
				continue
			}
			idx := config.PrefixIndex(c.pdPool, c.pdLen, l.Prefix())
			if idx >= n.first && idx < n.first+n.slice.Len() {
				if used {
					n.slice.Set(idx - n.first)
				} else {
					n.slice.Clear(idx - n.first)
				}
			}
		}
	}
}

// clientMAC is the MAC a DHCPv6 client is known by, for MAC-based
// reservations and pinned prefixes: the one its DUID carries (DUID-LL,
// DUID-LLT); else the client link-layer address a relay added (RFC 6939);
// else the one inside its EUI-64 link-local address. A client with a
// DUID-EN or DUID-UUID and privacy addresses has none, and gets dynamic
// service.
func (s *Server) clientMAC(d dhcpv6.DUID, via netip.Addr, msg *dhcpv6.Message, relay *dhcpv6.RelayMessage) string {
	if m := macFromDUID(d); m != "" {
		return m
	}
	if relay != nil {
		if _, hw := relay.Options.ClientLinkLayerAddress(); len(hw) == 6 {
			return strings.ToUpper(hw.String())
		}
	}
	if via.Is6() && via.IsLinkLocalUnicast() {
		b := via.As16()
		if b[11] == 0xff && b[12] == 0xfe {
			hw := net.HardwareAddr{b[8] ^ 0x02, b[9], b[10], b[13], b[14], b[15]}
			return strings.ToUpper(hw.String())
		}
	}
	return ""
}

// macFromDUID returns the link-layer address a DUID-LL or DUID-LLT carries,
// which is how MAC-based reservations and pinned prefixes find a DHCPv6
// client.
func macFromDUID(d dhcpv6.DUID) string {
	var hw net.HardwareAddr
	switch v := d.(type) {
	case *dhcpv6.DUIDLL:
		hw = v.LinkLayerAddr
	case *dhcpv6.DUIDLLT:
		hw = v.LinkLayerAddr
	}
	if len(hw) != 6 {
		return ""
	}
	return strings.ToUpper(hw.String())
}

func duidString(d dhcpv6.DUID) string { return hex.EncodeToString(d.ToBytes()) }

// SetClient applies one MAC reservation change in place (old nil: added;
// cl nil: removed): hostname, fixed IA_NA address (and its pool slot) and
// pinned prefix.
func (s *Server) SetClient(old, cl *config.Client) {
	s.tab.Lock()
	defer s.tab.Unlock()
	c := s.cur
	if old != nil {
		m, _ := config.NormalizeMAC(old.MAC)
		delete(c.hostByMAC, m)
		if a, ok := c.fixed[m]; ok {
			delete(c.fixed, m)
			delete(c.fixedSet, a)
			if s.tab.Get(lease.AddrKey(lease.NA, a)) == nil {
				for _, n := range c.nets {
					if i, ok := n.pool.Index(a); ok {
						n.pool.Clear(i)
					}
				}
			}
		}
		if p, ok := c.pinned[m]; ok {
			delete(c.pinned, m)
			delete(c.pinnedSet, p)
		}
	}
	if cl != nil {
		m, _ := config.NormalizeMAC(cl.MAC)
		h := cl.Hostname
		if h == "" {
			h = config.DefaultHostname(m)
		}
		c.hostByMAC[m] = h
		if cl.IPv6.IsValid() {
			c.fixed[m] = cl.IPv6
			c.fixedSet[cl.IPv6] = true
			for _, n := range c.nets {
				if i, ok := n.pool.Index(cl.IPv6); ok {
					n.pool.Set(i)
				}
			}
		}
		if cl.Prefix6.IsValid() {
			c.pinned[m] = cl.Prefix6
			c.pinnedSet[cl.Prefix6] = true
		}
	}
}
