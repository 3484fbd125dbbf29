// Package subscribers is the service that owns MAC clients, plans and
// fibre services. Today it serves the plans; each bus endpoint is one
// binding of an operation of proto/api onto a method of the plan book.
package subscribers

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/services/subscribers/plan"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix.
const Name = "subscribers"

// Deps are what the service is built on.
type Deps struct {
	NC  *nats.Conn
	KV  *clientv3.Client
	Log *slog.Logger
	Now func() time.Time
}

// Service is the subscribers service.
type Service struct {
	deps  Deps
	plans *plan.Book
}

// New builds the service.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	s := &Service{deps: d, plans: plan.NewBook(store.New(d.KV, Name), d.Now)}
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
	return s
}

// Run serves until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "MAC clients, plans and fibre services",
		Log:       s.deps.Log,
		Endpoints: s.Endpoints(),
	})
}

// Endpoints are the service's operations; Run serves them on the bus, and
// benchmarks call them directly to measure the bus hop.
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.PlansList, s.plans.List),
		bus.Bind(api.PlansPut, s.plans.Put),
		bus.Bind(api.PlansDelete, s.plans.Delete),
		bus.Bind(api.ClientsSummary, s.plans.Summary),
		bus.Bind(api.SubscribersConfig.Export, s.plans.Export),
		bus.Bind(api.SubscribersConfig.Import, s.plans.Import),
		bus.Bind(api.PlansGet, func(ctx context.Context, r *api.PlanRef) (*api.Plan, error) {
			p, err := s.plans.Get(ctx, r.Name)
			if err != nil {
				return nil, err
			}
			return &p, nil
		}),
	}
}
