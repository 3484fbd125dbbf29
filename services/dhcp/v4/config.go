// Package v4 is the DHCPv4 server logic: a chain of small handlers, built as
// values from typed configuration, that turns one request into one answer
// plus the lease writes that must be durable before the answer is sent.
//
// It knows nothing of sockets or namespaces; package dhcp (the engine) feeds
// it packets and sends what it returns, which is what lets the unit tests
// build a packet and check the answer's options directly.
package v4

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/services/dhcp/opt82"
	"routerd.dev/services/dhcp/pool"
)

// Event is what the engine publishes for a lease change.
type Event = lease.Event

// Reply is what Handle decided: an answer to send (may be nil), where to,
// and the writes and events that go with it.
type Reply struct {
	Resp   []byte // nil or empty: nothing to send
	Dst    netip.AddrPort
	Ops    []lease.Op
	Events []Event
}

func (r *Reply) reset() {
	r.Resp, r.Dst, r.Ops, r.Events = r.Resp[:0], netip.AddrPort{}, r.Ops[:0], r.Events[:0]
}

// network is one served IPv4 network, compiled.
type network struct {
	cfg   config.Network
	mask  []byte // option 1
	bcast netip.Addr
	dns   []netip.Addr
	pool  *pool.Range
	lease uint32 // seconds
	// suspended: nothing is answered for this network (config.Suspended),
	// not even a relayed request; its pool and leases stay.
	suspended bool
}

// compiled is one configuration, ready to answer from. It is replaced whole
// on reconfiguration; pools are rebuilt from the lease table so no lease is
// lost.
type compiled struct {
	byIface    map[string]*network
	nets       []*network
	byMAC      map[string]config.Client
	fixedIPs   map[netip.Addr]bool
	opt82      bool
	lookup     opt82.Lookup
	domain     string
	quarantine time.Duration
	offerHold  time.Duration
	cache      float64 // lease cache threshold, see config.Timers
}

// Server answers DHCPv4 for every served IPv4 network.
type Server struct {
	tab    *lease.Table
	now    func() time.Time
	log    *slog.Logger
	lookup opt82.Lookup
	cur    *compiled // guarded by tab's lock
}

// Deps are what the server needs from the engine.
type Deps struct {
	Table *lease.Table
	// Lookup maps option 82 to a fixed address; nil uses the configured
	// services with the Huawei circuit-id format.
	Lookup opt82.Lookup
	Now    func() time.Time
	Log    *slog.Logger
}

// New returns a server for cfg (already defaulted and validated).
func New(cfg config.Config, d Deps) (*Server, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	s := &Server{tab: d.Table, now: d.Now, log: d.Log, lookup: d.Lookup}
	s.tab.Lock()
	defer s.tab.Unlock()
	return s, s.reconfigureLocked(cfg)
}

// Reconfigure swaps in cfg (already validated) without touching leases.
func (s *Server) Reconfigure(cfg config.Config) error {
	s.tab.Lock()
	defer s.tab.Unlock()
	return s.reconfigureLocked(cfg)
}

func (s *Server) reconfigureLocked(cfg config.Config) error {
	c := &compiled{
		byIface:    map[string]*network{},
		byMAC:      map[string]config.Client{},
		fixedIPs:   map[netip.Addr]bool{},
		opt82:      cfg.Option82.Enabled,
		lookup:     s.lookup,
		domain:     cfg.DNS.Domain,
		quarantine: cfg.Timers.Quarantine,
		offerHold:  cfg.Timers.OfferHold,
		cache:      cfg.Timers.CacheThreshold,
	}
	if c.lookup == nil {
		c.lookup = opt82.NewServiceLookup(cfg.Services)
	}
	for _, cl := range cfg.Clients {
		m, err := config.NormalizeMAC(cl.MAC)
		if err != nil {
			return err
		}
		if cl.Hostname == "" {
			cl.Hostname = config.DefaultHostname(m)
		}
		c.byMAC[m] = cl
		c.fixedIPs[cl.IP] = true
	}
	for _, sv := range cfg.Services {
		c.fixedIPs[sv.IPv4] = true
	}
	for _, nc := range cfg.Networks {
		n := &network{
			cfg:   nc,
			mask:  net.CIDRMask(nc.Prefix.Bits(), 32),
			bcast: config.LastAddr(nc.Prefix),
			lease: uint32(nc.LeaseTime / time.Second),
		}
		dns := cfg.DNS.V4
		if o, ok := cfg.DNS.PerIface[nc.Iface]; ok && len(o.V4) > 0 {
			dns = o.V4
		}
		n.dns = append([]netip.Addr(nil), dns...)
		first, last := nc.PoolStart, nc.PoolEnd
		if !first.IsValid() {
			first, last = nc.Prefix.Addr().Next(), config.LastAddr(nc.Prefix).Prev()
		}
		n.pool = pool.NewRange(first, last)
		if i, ok := n.pool.Index(nc.Gateway); ok {
			n.pool.Set(i)
		}
		_, n.suspended = cfg.Suspended[nc.Iface]
		c.nets = append(c.nets, n)
		if !n.suspended {
			c.byIface[nc.Iface] = n
		}
	}
	// Fixed addresses are never handed out dynamically.
	for ip := range c.fixedIPs {
		for _, n := range c.nets {
			if i, ok := n.pool.Index(ip); ok {
				n.pool.Set(i)
			}
		}
	}
	// Every lease that survives (bound, offered, quarantined) keeps its slot.
	s.tab.Each(func(l *lease.Lease) {
		if l.Kind != lease.V4 {
			return
		}
		for _, n := range c.nets {
			if i, ok := n.pool.Index(l.Addr); ok {
				n.pool.Set(i)
			}
		}
	})
	s.cur = c
	return nil
}

// selectNetwork picks the served network of a request: the one holding the
// relay's giaddr when relayed, else the one on the receiving interface. A
// relayed request must still arrive on a served interface.
func (c *compiled) selectNetwork(iface string, giaddr netip.Addr) *network {
	if g := giaddr; g.IsValid() {
		for _, n := range c.nets {
			if n.cfg.Prefix.Contains(g) && !n.suspended {
				return n
			}
		}
		return nil
	}
	return c.byIface[iface]
}

// Stats is a snapshot of one network's pool, for the API's usage views.
type Stats struct {
	Iface string
	Size  uint64
	Used  uint64
}

// Stats returns pool usage per network.
func (s *Server) Stats() []Stats {
	s.tab.Lock()
	defer s.tab.Unlock()
	var out []Stats
	for _, n := range s.cur.nets {
		out = append(out, Stats{Iface: n.cfg.Iface, Size: n.pool.Len(), Used: n.pool.Used()})
	}
	return out
}

func (n *network) String() string { return fmt.Sprintf("%s %v", n.cfg.Iface, n.cfg.Prefix) }

// SetClient applies one MAC reservation change in place (old nil: added;
// cl nil: removed): the reservation map, the fixed set and the pool slot
// of its address, nothing else.
func (s *Server) SetClient(old, cl *config.Client) {
	s.tab.Lock()
	defer s.tab.Unlock()
	c := s.cur
	if old != nil {
		m, _ := config.NormalizeMAC(old.MAC)
		delete(c.byMAC, m)
		s.unfix(old.IP)
	}
	if cl != nil {
		m, _ := config.NormalizeMAC(cl.MAC)
		r := *cl
		if r.Hostname == "" {
			r.Hostname = config.DefaultHostname(m)
		}
		c.byMAC[m] = r
		s.fix(r.IP)
	}
}

// SetService applies one fibre service change in place: its fixed address
// and, when the engine uses the configured services' lookup, its option 82
// binding.
func (s *Server) SetService(old, sv *config.Service) {
	s.tab.Lock()
	defer s.tab.Unlock()
	l, _ := s.cur.lookup.(*opt82.ServiceLookup)
	if old != nil {
		if l != nil {
			l.Delete(*old)
		}
		s.unfix(old.IPv4)
	}
	if sv != nil {
		if l != nil {
			l.Put(*sv)
		}
		s.fix(sv.IPv4)
	}
}

func (s *Server) fix(ip netip.Addr) {
	s.cur.fixedIPs[ip] = true
	for _, n := range s.cur.nets {
		if i, ok := n.pool.Index(ip); ok {
			n.pool.Set(i)
		}
	}
}

// unfix gives a formerly fixed address back to the pool unless a lease
// still holds it (it returns when that lease goes).
func (s *Server) unfix(ip netip.Addr) {
	delete(s.cur.fixedIPs, ip)
	if s.tab.Get(lease.AddrKey(lease.V4, ip)) != nil {
		return
	}
	for _, n := range s.cur.nets {
		if i, ok := n.pool.Index(ip); ok {
			n.pool.Clear(i)
		}
	}
}
