// Package dhcp is the DHCP engine of the router: DHCPv4, DHCPv6 with prefix
// delegation and router advertisements, served from sockets inside a target
// network namespace, with leases kept in memory and made durable (group
// committed to the lease store) before any answer that grants them goes out.
//
// The engine is a library value: New(cfg, deps) then Run(ctx). The bus
// service and the HTTP areas (/net, /net6, /pd, /dns, /option82, clients,
// services) are thin adapters onto Reconfigure, Leases, Lease and SyncRoutes.
package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/services/dhcp/opt82"
	"routerd.dev/services/dhcp/ra"
	"routerd.dev/services/dhcp/route"
	"routerd.dev/services/dhcp/v4"
	"routerd.dev/services/dhcp/v6"
	"routerd.dev/shared/netns"
)

// Events receives what the engine observes. Kinds: lease_granted,
// lease_renewed, lease_released, lease_declined, lease_expired,
// unknown_device; the payload is a lease.Lease. Publish is called on the
// answer path and must not block. The bus service (service.go, events.go)
// publishes them on router.events.dhcp.<kind> with the kinds dotted like
// every service's (lease.granted, device.unknown), through a bounded
// buffer, at most one unknown_device per interface and MAC a minute.
type Events interface {
	Publish(kind string, payload any)
}

type noEvents struct{}

func (noEvents) Publish(string, any) {}

// Deps are the engine's collaborators.
type Deps struct {
	// Store keeps leases durably (lease.EtcdStore in production).
	Store lease.Store
	// NetNS is the namespace to serve in (shared/netns.Open("") for the
	// process's own).
	NetNS *netns.NS
	// Events receives lease and device events; nil drops them.
	Events Events
	// Lookup maps option 82 to fixed addresses; nil uses the configured
	// services with the Huawei circuit-id format.
	Lookup opt82.Lookup
	Log    *slog.Logger
	Now    func() time.Time
	// MaxBatch bounds the lease writes of one group commit; 0 is 4096.
	MaxBatch int
	// ListenRetry is how often interfaces that could not be listened on
	// (not created yet) are retried; 0 is 2 s.
	ListenRetry time.Duration
}

// Engine serves DHCP on the configured interfaces.
type Engine struct {
	d      Deps
	log    *slog.Logger
	cfg    atomic.Pointer[config.Config]
	tab    *lease.Table
	v4     *v4.Server
	v6     *v6.Server
	com    *lease.Committer
	routes *route.Manager
	// routeQ carries delegated-route changes from commit callbacks to the
	// one goroutine that applies them, in order: a netlink round trip per
	// route would otherwise hold up the next group commit.
	routeQ chan routeJob
	kick   chan struct{}

	// resMu serialises reconfiguration and element reservation changes;
	// res holds the element reservations (see resv.go).
	resMu sync.Mutex
	res   reservations

	mu        sync.Mutex
	listeners map[string]*listener // "4|iface", "6|iface", "ra|iface"
	wg        sync.WaitGroup
}

type listener struct {
	key, iface string
	sock       *udpSock
	ra         *ra.Advertiser
	stop       context.CancelFunc
	log        *slog.Logger
	paced      chan outMsg
	bucket     *bucket       // paces every answer the listener sends
	received   atomic.Uint64 // datagrams read from the socket
	shed       atomic.Uint64 // requests dropped for waiting too long in the queue
}

// ListenerStats counts one listener's traffic since it opened.
type ListenerStats struct {
	Listener string `json:"listener"` // "4|iface", "6|iface"
	Received uint64 `json:"received"`
	// Shed counts requests dropped unanswered because they had waited
	// over a second in the socket queue: the engine was overloaded.
	Shed uint64 `json:"shed"`
}

// Listeners returns the DHCP listeners' counters, sorted by listener.
func (e *Engine) Listeners() []ListenerStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []ListenerStats
	for k, l := range e.listeners {
		if l.sock != nil {
			out = append(out, ListenerStats{Listener: k, Received: l.received.Load(), Shed: l.shed.Load()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Listener < out[j].Listener })
	return out
}

type outMsg struct {
	b   []byte
	dst netip.AddrPort
}

// New validates cfg and builds an engine; nothing is opened until Run.
func New(cfg config.Config, d Deps) (*Engine, error) {
	if d.Store == nil {
		return nil, errors.New("dhcp: a lease store is required")
	}
	if d.NetNS == nil {
		return nil, errors.New("dhcp: a target network namespace is required")
	}
	if d.Events == nil {
		d.Events = noEvents{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.ListenRetry == 0 {
		d.ListenRetry = 2 * time.Second
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dhcp: invalid configuration: %w", err)
	}
	e := &Engine{d: d, log: d.Log, tab: lease.NewTable(), kick: make(chan struct{}, 1), listeners: map[string]*listener{},
		routeQ: make(chan routeJob, 1<<14), res: newReservations()}
	e.cfg.Store(&cfg)
	e.res.indexOwners(cfg)
	var err error
	if e.v4, err = v4.New(cfg, v4.Deps{Table: e.tab, Lookup: d.Lookup, Now: d.Now, Log: d.Log}); err != nil {
		return nil, err
	}
	if e.v6, err = v6.New(cfg, v6.Deps{Table: e.tab, ServerID: e.serverDUID(cfg), Now: d.Now, Log: d.Log}); err != nil {
		return nil, err
	}
	e.com = lease.NewCommitter(d.Store, d.MaxBatch, d.Log)
	e.com.Gather, e.com.GatherBelow = commitGather, commitGatherBelow
	return e, nil
}

// serverDUID is a DUID-LL made from the first served IPv6 interface's MAC,
// stable across restarts as long as that interface is.
func (e *Engine) serverDUID(cfg config.Config) dhcpv6.DUID {
	hw := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	if len(cfg.Networks6) > 0 {
		if h, err := e.d.NetNS.Netlink(); err == nil {
			if l, err := h.LinkByName(cfg.Networks6[0].Iface); err == nil && len(l.Attrs().HardwareAddr) == 6 {
				hw = l.Attrs().HardwareAddr
			}
			h.Close()
		}
	}
	return &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: hw}
}

// Config returns the configuration in force.
func (e *Engine) Config() config.Config { return *e.cfg.Load() }

// Reconfigure validates cfg whole and applies it without restarting the
// listeners of interfaces that stay served and without dropping any lease.
// An invalid configuration is refused and the previous one stays.
//
// The element reservations (PutClient, PutService) are kept and compiled
// with cfg's own; cfg is refused when they no longer fit it (e.g. a served
// network holding reservations is removed).
func (e *Engine) Reconfigure(cfg config.Config) error {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	return e.reconfigureLocked(cfg)
}

func (e *Engine) reconfigureLocked(cfg config.Config) error {
	cfg = cfg.WithDefaults()
	full := e.withReservations(cfg)
	if err := full.Validate(); err != nil {
		return fmt.Errorf("dhcp: configuration refused, previous one kept: %w", err)
	}
	if err := e.v4.Reconfigure(full); err != nil {
		return err
	}
	if err := e.v6.Reconfigure(full); err != nil {
		return err
	}
	e.res.indexOwners(full)
	e.cfg.Store(&cfg)
	e.mu.Lock()
	for _, l := range e.listeners {
		if l.ra != nil {
			l.ra.Update(e.raConfig(cfg, l.iface))
		}
	}
	e.mu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
	return nil
}

// Run loads the leases, opens the listeners and serves until ctx ends.
func (e *Engine) Run(ctx context.Context) error {
	leases, err := e.d.Store.Load(ctx)
	if err != nil {
		return fmt.Errorf("dhcp: %w", err)
	}
	e.tab.Lock()
	for i := range leases {
		e.tab.Put(&leases[i])
	}
	e.tab.Unlock()
	e.resMu.Lock()
	cfg := e.Config()
	full := e.withReservations(cfg)
	err = e.v4.Reconfigure(full)
	if err == nil {
		err = e.v6.Reconfigure(full)
	}
	e.resMu.Unlock()
	if err != nil {
		return err
	}
	e.log.Info("dhcp engine starting", "leases", len(leases), "netns", e.d.NetNS.Path())

	h, err := e.d.NetNS.Netlink()
	if err != nil {
		return fmt.Errorf("dhcp: netlink handle: %w", err)
	}
	defer h.Close()
	e.routes = route.New(h)
	if out, err := e.routes.Sync(e.v6.Routes(), false); err != nil {
		e.log.Warn("delegated route sync at start", "err", err, "report", out)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	comDone := make(chan struct{})
	go func() { e.com.Run(ctx); close(comDone) }()
	routesDone := make(chan struct{})
	go func() { e.applyRoutes(); close(routesDone) }()

	retry := time.NewTicker(e.d.ListenRetry)
	defer retry.Stop()
	reclaim := time.NewTicker(cfg.Timers.Reclaim)
	defer reclaim.Stop()
	for {
		e.reconcileListeners(ctx)
		select {
		case <-ctx.Done():
			e.closeAll()
			e.wg.Wait()
			<-comDone
			close(e.routeQ) // no commit can queue a change any more
			<-routesDone
			return nil
		case <-e.kick:
		case <-retry.C:
		case <-reclaim.C:
			e.Reclaim(ctx)
		}
	}
}

// Reclaim removes expired leases now (the engine also does it periodically).
func (e *Engine) Reclaim(ctx context.Context) {
	now := e.d.Now()
	ops4, ev4 := e.v4.Reclaim(now)
	ops6, ev6, dels := e.v6.Reclaim(now)
	ops := append(ops4, ops6...)
	if len(ops) == 0 {
		return
	}
	events := append(ev4, ev6...)
	e.com.Submit(ops, func(err error) {
		if err != nil {
			return
		}
		e.changeRoutes(dels, nil)
		e.publish(events)
	})
}

// routeJob is the delegated-route change that follows one durable commit.
type routeJob struct {
	del []netip.Prefix
	add []route.Want
}

// changeRoutes queues a route change for applyRoutes; it waits when the
// queue is full rather than reorder changes.
func (e *Engine) changeRoutes(del []netip.Prefix, add []route.Want) {
	if len(del) > 0 || len(add) > 0 {
		e.routeQ <- routeJob{del, add}
	}
}

// applyRoutes is the one writer of delegated routes during Run. A change
// that fails is logged; the reconciler (SyncRoutes, and every start)
// repairs it from the leases.
func (e *Engine) applyRoutes() {
	for j := range e.routeQ {
		for _, p := range j.del {
			if err := e.routes.Del(p); err != nil {
				e.log.Warn("withdraw delegated route", "prefix", p, "err", err)
			}
		}
		for _, w := range j.add {
			if err := e.routes.Add(w); err != nil {
				e.log.Warn("install delegated route", "route", w.String(), "err", err)
			}
		}
	}
}

func (e *Engine) publish(events []lease.Event) {
	for _, ev := range events {
		e.d.Events.Publish(ev.Kind, ev.Lease)
	}
}

// Leases returns every lease (offers included), sorted by key.
func (e *Engine) Leases() []lease.Lease {
	e.tab.Lock()
	defer e.tab.Unlock()
	out := make([]lease.Lease, 0, e.tab.Len())
	e.tab.Each(func(l *lease.Lease) { out = append(out, *l) })
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// Lease looks up the lease on an address (IPv4 or IA_NA) or delegated prefix.
func (e *Engine) Lease(p netip.Prefix) (lease.Lease, bool) {
	e.tab.Lock()
	defer e.tab.Unlock()
	keys := []string{lease.PrefixKey(p)}
	if p.IsSingleIP() {
		keys = []string{lease.AddrKey(lease.V4, p.Addr()), lease.AddrKey(lease.NA, p.Addr())}
	}
	for _, k := range keys {
		if l := e.tab.Get(k); l != nil {
			return *l, true
		}
	}
	return lease.Lease{}, false
}

// SyncRoutes runs the delegated-route reconciler (/pd/sync); with dry it
// only reports what it would change.
func (e *Engine) SyncRoutes(dry bool) ([]string, error) {
	if e.routes == nil {
		return nil, errors.New("dhcp: engine not running")
	}
	return e.routes.Sync(e.v6.Routes(), dry)
}

// commitThen makes ops durable, then runs send; with no ops it sends at once.
func (e *Engine) commitThen(ops []lease.Op, send func()) {
	if len(ops) == 0 {
		send()
		return
	}
	e.com.Submit(ops, func(err error) {
		if err != nil {
			// No answer: the client retries, and nothing was promised.
			return
		}
		send()
	})
}
