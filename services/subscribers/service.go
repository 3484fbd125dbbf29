// Package subscribers is the service that owns MAC clients, plans and
// fibre services. Each bus endpoint is one binding of an operation of
// proto/api onto a method of the plan book (package plan) or the client
// book (package client).
package subscribers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/services/subscribers/client"
	"routerd.dev/services/subscribers/fibre"
	"routerd.dev/services/subscribers/plan"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/docobj"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix.
const Name = "subscribers"

// ExpiryEvery is how often every client's end date is reconciled.
const ExpiryEvery = 5 * time.Minute

// RestoreWait is how long an import that is part of a restore holds the
// reconcile of the clients' effects when the restore's end is never
// announced (its config.restored event lost, the system service gone):
// longer than a restore's imports may take (60 s each, two groups after
// dhcp and this service, and the rollback again), after which the
// reconcile runs anyway.
const RestoreWait = 5 * time.Minute

// Deps are what the service is built on.
type Deps struct {
	NC  *nats.Conn
	KV  *clientv3.Client
	Log *slog.Logger
	Now func() time.Time
	// NS is the router's namespace, whose neighbour table says which
	// clients are online; nil: every client counts offline.
	NS *netns.NS
	// ExpiryEvery overrides ExpiryEvery (tests).
	ExpiryEvery time.Duration
	// NoReconcile skips the reconcile of the clients' effects at start
	// (benchmarks measuring it themselves).
	NoReconcile bool
}

// Service is the subscribers service.
type Service struct {
	deps    Deps
	plans   *plan.Book
	clients *client.Book
	onBus   *client.OnBus
	// kick asks the background loop for a reconcile of every owner (after
	// an import).
	kick chan struct{}
	// held are the restores (api.ConfigDocuments.Restore) whose end the
	// reconcile after this service's import waits for, each with the
	// timer that runs it after RestoreWait if no end is announced.
	heldMu sync.Mutex
	held   map[string]*time.Timer
	// events are the client.reshaped publications under way; Run waits
	// for them before it returns.
	events sync.WaitGroup
}

// New builds the service.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.ExpiryEvery == 0 {
		d.ExpiryEvery = ExpiryEvery
	}
	st := store.New(d.KV, Name)
	s := &Service{deps: d, plans: plan.NewBook(st, d.Now), onBus: &client.OnBus{NC: d.NC}, kick: make(chan struct{}, 1),
		held: map[string]*time.Timer{}}
	cd := client.Deps{St: st, Plans: s.plans, Nets: s.onBus, Fx: s.onBus, Leases: s.onBus, Now: d.Now, Log: d.Log,
		Pub: bus.NewPublisher(d.NC, Name, d.Log)}
	if d.NS != nil {
		cd.Neigh = client.Netlink{NS: d.NS}
	}
	s.clients = client.New(cd)
	// A changed plan starts the OLTs' plan synchronisation (the olt
	// service; none running or none registered is null in the answer).
	s.plans.OLTSync = func(ctx context.Context) (int, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		a, err := bus.Invoke(ctx, d.NC, api.OLTSyncStart, &api.None{})
		if err != nil {
			return 0, err
		}
		return a.OLTs, nil
	}
	// New rates of a plan reshape all its clients at once (the shaper),
	// each then reported by a client.reshaped event. The events follow the
	// answer rather than hold it (reading 10,000 records and publishing
	// them took half a second, as long again as the reshape); an event
	// not published never fails the change.
	s.plans.Reshape = func(ctx context.Context, p plan.Plan) error {
		if _, err := s.onBus.ReshapePlan(ctx, &api.PlanRates{Plan: p.Name, DownMbps: p.DownMbps, UpMbps: p.UpMbps}); err != nil {
			return err
		}
		s.events.Add(1)
		go func(ctx context.Context) {
			defer s.events.Done()
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if n, err := s.clients.Reshaped(ctx, p.Name); err != nil {
				d.Log.Warn("client.reshaped events not all published", "plan", p.Name, "published", n, "err", err)
			}
		}(context.WithoutCancel(ctx))
		return nil
	}
	return s
}

// Clients is the client book (benchmarks and tests).
func (s *Service) Clients() *client.Book { return s.clients }

// Run serves until ctx ends. Beside the bus endpoints it reconciles the
// clients' effects with their owners at start (each owner until it has
// answered once) and every client's end date at start and every
// ExpiryEvery.
func (s *Service) Run(ctx context.Context) error {
	// A restore's end runs the reconcile its import held.
	sub, err := s.deps.NC.Subscribe(event.Subject("system", event.ConfigRestored), func(m *nats.Msg) {
		var ev event.Event
		var end event.RestoreEnd
		if json.Unmarshal(m.Data, &ev) == nil && json.Unmarshal(ev.Data, &end) == nil {
			s.restoreEnded(end.Restore)
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := s.migrate(ctx); err != nil {
		return err
	}
	go s.background(ctx)
	err = bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "MAC clients, plans and fibre services",
		Log:       s.deps.Log,
		Endpoints: s.Endpoints(),
	})
	s.events.Wait()
	return err
}

// migrate rewrites the index keys of an earlier version before the
// replica serves (a plan's users read from the old keys would let DELETE
// /plans remove a plan in use), trying for a few seconds while etcd is
// not there.
func (s *Service) migrate(ctx context.Context) error {
	var err error
	for try := 0; try < 5; try++ {
		var n int
		if n, err = s.clients.MigrateIndex(ctx); err == nil {
			if n > 0 {
				s.deps.Log.Info("index keys of an earlier version rewritten", "clients", n)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("subscribers: index keys of an earlier version: %w", err)
}

func (s *Service) background(ctx context.Context) {
	log := s.deps.Log
	// One replica at a time does the periodic work.
	exclusive := func(name string, fn func()) {
		l, err := store.TryLock(ctx, s.deps.KV, "subscribers/"+name)
		if err != nil {
			if !errors.Is(err, store.ErrHeld) && ctx.Err() == nil {
				log.Warn("lock not taken", "lock", name, "err", err)
			}
			return
		}
		defer l.Unlock(context.WithoutCancel(ctx))
		fn()
	}
	expiry := func() {
		exclusive("expiry", func() {
			if _, err := s.clients.ReconcileExpiries(ctx); err != nil && ctx.Err() == nil {
				log.Warn("end dates not reconciled", "err", err)
			}
		})
	}
	expiry()
	pending := append([]string(nil), client.Owners...)
	if s.deps.NoReconcile {
		pending = nil
	}
	retry := time.Second
	tick := time.NewTicker(s.deps.ExpiryEvery)
	defer tick.Stop()
	for {
		var again <-chan time.Time
		if len(pending) > 0 {
			exclusive("reconcile", func() {
				res, err := s.clients.Reconcile(ctx, pending...)
				if err != nil {
					log.Warn("clients' effects not reconciled", "err", err)
					return
				}
				var left []string
				for _, o := range pending {
					if why, ok := res.Skipped[o]; ok {
						left = append(left, o)
						log.Debug("clients' effects: owner not reconciled yet", "owner", o, "why", why)
					}
				}
				log.Info("clients' effects reconciled", "clients", res.Clients, "reserved", res.Reserved, "unreserved", res.Unreserved,
					"shaped", res.Shaped, "unshaped", res.Unshaped, "blocked", res.Blocked, "unblocked", res.Unblocked,
					"failed", res.Failed, "waiting_for", left)
				if len(left) == 0 {
					// End dates the effects' owners could not take yet.
					defer expiry()
				}
				pending = left
			})
			if len(pending) > 0 {
				again = time.After(retry)
				retry = min(retry*2, time.Minute)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			expiry()
		case <-again:
		case <-s.kick:
			pending, retry = append([]string(nil), client.Owners...), time.Second
		}
	}
}

// unregistered is GET /services/unregistered (package fibre).
func (s *Service) unregistered(ctx context.Context, in *api.UnregisteredRequest) (*api.UnregisteredAnswer, error) {
	return fibre.Unregistered(ctx, s.deps.NC, in)
}

// Endpoints are the service's operations; Run serves them on the bus, and
// benchmarks call them directly to measure the bus hop.
func (s *Service) Endpoints() []bus.Endpoint {
	c := s.clients
	return []bus.Endpoint{
		bus.Bind(api.PlansList, s.plans.List),
		bus.Bind(api.PlansPut, s.plans.Put),
		bus.Bind(api.PlansDelete, s.plans.Delete),
		bus.Bind(api.ClientsSummary, c.Summary),
		bus.Bind(api.SubscribersConfig.Export, s.exportDocs),
		bus.Bind(api.SubscribersConfig.Import, s.importDocs),
		bus.Bind(api.PlansGet, func(ctx context.Context, r *api.PlanRef) (*api.Plan, error) {
			p, err := s.plans.Get(ctx, r.Name)
			if err != nil {
				return nil, err
			}
			return &p, nil
		}),
		bus.Bind(api.ClientsPage, c.Page),
		bus.Bind(api.ClientsList, c.List),
		bus.Bind(api.ClientsSearch, c.List),
		bus.Bind(api.ClientsGet, c.Get),
		bus.Bind(api.ClientsAdd, c.Add),
		bus.Bind(api.ClientsDelete, c.Delete),
		bus.Bind(api.ClientsSetPlan, c.SetPlan),
		bus.Bind(api.ClientsSuspend, c.Suspend),
		bus.Bind(api.ClientsResume, c.Resume),
		bus.Bind(api.ClientsExpires, c.SetExpires),
		bus.Bind(api.ClientsActive, c.Active),
		bus.Bind(api.ClientsConnected, c.Active),
		bus.Bind(api.Clients6, c.Clients6),
		bus.Bind(api.IPsGet, c.IPs),
		bus.Bind(api.ServicesUnregistered, s.unregistered),
	}
}

// exportDocs is subscribers.config.export: etc/plans.json and, when there
// are clients, etc/clients.json (as an object of the document store past
// docobj.InlineMax: never whole in memory).
func (s *Service) exportDocs(ctx context.Context, in *api.None) (*api.ConfigDocuments, error) {
	d, err := s.plans.Export(ctx, in)
	if err != nil {
		return nil, err
	}
	var n int
	text, obj, err := docobj.Render(ctx, s.deps.NC, client.Document, func(w io.Writer) (err error) {
		n, err = s.clients.Render(ctx, w)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Left out while there is no client (the owners' tests expect their
	// document sets; a restore of a version without it keeps the clients).
	switch {
	case obj != nil:
		d.Objects = map[string]api.ConfigObject{client.Document: *obj}
	case n > 0:
		d.Documents[client.Document] = text
	}
	return d, nil
}

// importDocs is subscribers.config.import. With etc/clients.json (text or
// an object, read as a stream: one client in memory at a time), both
// documents are checked first (each client's plan must be in the plans
// brought in, or stored when no etc/plans.json comes), then the stored
// clients made those of the document, writing only what differs
// (client.Book.ImportDocument: nothing when the document is what is
// stored; not one transaction, a failure half way says how far it got),
// then the plans replaced; their effects follow by a reconcile with
// every owner.
func (s *Service) importDocs(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	open := func() (io.ReadCloser, error) {
		r, _, err := docobj.Reader(ctx, s.deps.NC, in, client.Document)
		return r, err
	}
	if !docobj.Has(in, client.Document) {
		return s.plans.Import(ctx, in)
	}
	var names map[string]bool
	if ptext, ok := in.Documents[plan.Document]; ok {
		n, err := plan.Names(ptext)
		if err != nil {
			return nil, err
		}
		names = n
	} else {
		l, err := s.plans.List(ctx, &api.None{})
		if err != nil {
			return nil, err
		}
		names = map[string]bool{}
		for _, p := range l.Plans {
			names[p.Name] = true
		}
	}
	// The clients first (those the document drops no longer hold their
	// plans, which the plans' import checks), writing only what differs.
	t0 := time.Now()
	n, res, err := s.clients.ImportDocument(ctx, open, names)
	s.deps.Log.Info("clients imported", "clients", n, "unchanged_keys", res.Unchanged, "written", res.Written,
		"deleted", res.Deleted, "checked_in", res.Checked.Round(time.Millisecond), "took", time.Since(t0).Round(time.Millisecond), "err", err)
	if err != nil {
		return nil, err
	}
	out, err := s.plans.Import(ctx, in)
	if err != nil {
		return nil, err
	}
	out.Documents = append(out.Documents, client.Document)
	s.reconcileAfter(in.Restore)
	return out, nil
}

// reconcileAfter asks for a reconcile of the clients' effects after an
// import: at once, or, for an import that is part of a restore (dhcp's
// reservations imported beside it), when the restore ends: run while
// dhcp's import is still writing, it would make every reservation not yet
// written again one by one.
func (s *Service) reconcileAfter(restore string) {
	if restore == "" {
		s.reconcile()
		return
	}
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if _, ok := s.held[restore]; ok {
		return
	}
	s.held[restore] = time.AfterFunc(RestoreWait, func() {
		s.deps.Log.Warn("the end of a restore was not announced: its clients' effects reconciled now", "restore", restore, "after", RestoreWait)
		s.restoreEnded(restore)
	})
}

// restoreEnded runs the reconcile held for restore, if any.
func (s *Service) restoreEnded(restore string) {
	s.heldMu.Lock()
	t, ok := s.held[restore]
	delete(s.held, restore)
	s.heldMu.Unlock()
	if !ok {
		return
	}
	t.Stop()
	s.reconcile()
}

// reconcile asks the background loop for a reconcile of every owner.
func (s *Service) reconcile() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
