// Package cgnat is the service that owns the router's address
// translation in nftables (table `ip routerd_cgnat`, see package nft):
// source-NAT pools (/nat), deterministic carrier-grade NAT (/cgnat, one
// map element per subscriber, slots from package slot, an audit log of
// every assignment and release), and port forwards (/pf). Like netcfg it
// runs while it holds the host's lock (store.Hold), reconciles the kernel
// with etcd both ways at the start of each term, and writes etcd fenced by
// the lock, the intent first and the kernel second.
package cgnat

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vishvananda/netlink"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/services/cgnat/nft"
	"routerd.dev/services/cgnat/slot"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix.
const Name = "cgnat"

// Deps are what the service is built on.
type Deps struct {
	NC *nats.Conn
	KV *clientv3.Client
	NS *netns.NS
	// AuditLog is the path of the CGNAT audit log (appended to, created
	// with its directory when missing).
	AuditLog string
	Log      *slog.Logger
	Now      func() time.Time
	// ClientsRetry is how often the clients are asked again while the
	// subscribers service does not answer (default 5 s).
	ClientsRetry time.Duration
	// ClientsResync is how often the whole list is read again after the
	// first success, healing events missed (default 10 minutes).
	ClientsResync time.Duration
}

// Service is the cgnat service.
type Service struct {
	deps  Deps
	nl    *netlink.Handle
	k     *nft.K
	base  *store.Store
	pub   *bus.Publisher
	audit *audit

	mu sync.Mutex
	st *store.Store // the term's fenced store
	// The state, as stored (held under mu).
	cfg     Config
	plan    *slot.Plan
	exempt  []netip.Prefix
	subs    map[string]*Sub // by MAC
	bySlot  map[int]*Sub
	alloc   slot.Alloc
	waiting map[string]api.Client // clients without a slot (pool full or none)
	// untranslated are the clients known with no slot of their own: an
	// address in an exempt network (or not IPv4); an exempt change looks
	// at them again.
	untranslated map[string]api.Client
	// touched are the MACs client events changed while a page of clients
	// was being read: the event is newer than the page, so the sync
	// leaves them as the events made them.
	touched  map[string]bool
	pools    map[string]api.NATPool
	forwards map[string]api.Forward
	// disabledNets are the networks of switched-off VLANs (forwards to
	// them are not applied).
	disabledNets []netip.Prefix
	nearlyFull   bool
	clientsOK    bool
}

// New builds the service in its target namespace.
func New(d Deps) (*Service, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.ClientsRetry == 0 {
		d.ClientsRetry = 5 * time.Second
	}
	if d.ClientsResync == 0 {
		d.ClientsResync = 10 * time.Minute
	}
	nl, err := d.NS.Netlink()
	if err != nil {
		return nil, err
	}
	a, err := openAudit(d.AuditLog)
	if err != nil {
		nl.Close()
		return nil, err
	}
	st := store.New(d.KV, Name)
	return &Service{deps: d, nl: nl, k: nft.New(d.NS.FD(), d.NS.Path()), base: st, st: st,
		pub: bus.NewPublisher(d.NC, Name, d.Log), audit: a}, nil
}

// Run serves while it holds the host lock (store.Hold) until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	defer s.nl.Close()
	defer s.audit.Close()
	return store.Hold(ctx, s.deps.KV, Name+"/"+lockName(s.deps.NS), s.deps.Log, s.serve)
}

func lockName(ns *netns.NS) string {
	if ns.Path() == "" {
		return "host"
	}
	return fmt.Sprintf("ns-%x", []byte(ns.Path()))
}

// serve is one term: load the store, reconcile the kernel with it, follow
// the clients and VLANs, answer on the bus until ctx ends.
func (s *Service) serve(ctx context.Context, lock *store.Lock) error {
	s.mu.Lock()
	s.st = s.base.Fenced(lock)
	s.clientsOK = false
	s.mu.Unlock()
	if err := s.load(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cgnat: loading the store: %w", err)
	}
	// Events first, then the pages: a change between the two is applied
	// twice, never missed.
	sub, err := s.deps.NC.Subscribe(api.SubjectPrefix+".events.subscribers.client.*", s.onClientEvent)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	vsub, err := s.deps.NC.Subscribe(api.SubjectPrefix+".events.netcfg.vlan.*", func(*nats.Msg) { s.refreshVLANs(ctx) })
	if err != nil {
		return err
	}
	defer vsub.Unsubscribe()
	s.refreshVLANs(ctx)
	changes, err := s.Reconcile(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cgnat: reconciling the kernel: %w", err)
	}
	if changes > 0 {
		s.deps.Log.Info("kernel NAT table reconciled with the store", "changes", changes)
	}
	go s.followClients(ctx)
	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "address translation: NAT pools, CGNAT, port forwards",
		Log: s.deps.Log, Endpoints: s.Endpoints(),
	})
}

// Endpoints are the service's operations.
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.NATListOp, s.NATList),
		bus.Bind(api.NATAddOp, s.NATAdd),
		bus.Bind(api.NATDelOp, s.NATDelete),
		bus.Bind(api.PFList, s.ForwardsList),
		bus.Bind(api.PFAdd, s.ForwardAdd),
		bus.Bind(api.PFDel, s.ForwardDelete),
		bus.Bind(api.CGNATGet, s.Status),
		bus.Bind(api.CGNATSetOp, s.Set),
		bus.Bind(api.CGNATLookupOp, s.Lookup),
		bus.Bind(api.CGNATUses, s.Uses),
		bus.Bind(api.CGNATIfaceRemove, s.IfaceRemove),
		bus.Bind(api.CGNATConfig.Export, s.Export),
		bus.Bind(api.CGNATConfig.Import, s.Import),
	}
}

// followClients pages the clients from the subscribers service and
// brings the slots to them: at the start of the term (asked again every
// ClientsRetry until it answers), then every ClientsResync, healing
// client events the bus did not deliver.
func (s *Service) followClients(ctx context.Context) {
	for {
		wait := s.deps.ClientsRetry
		s.mu.Lock()
		s.touched = map[string]bool{}
		s.mu.Unlock()
		clients, err := s.pageClients(ctx)
		if err == nil {
			if err := s.SyncClients(ctx, clients); err != nil && ctx.Err() == nil {
				s.deps.Log.Warn("clients not synchronised", "err", err)
			} else {
				wait = s.deps.ClientsResync
			}
		} else if ctx.Err() == nil {
			s.deps.Log.Debug("clients not read from the subscribers service", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (s *Service) pageClients(ctx context.Context) ([]api.Client, error) {
	var out []api.Client
	after := ""
	for {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		page, err := bus.Invoke(c, s.deps.NC, api.ClientsPage, &api.ClientPageRequest{After: after, Limit: 5000})
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, page.Clients...)
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}
