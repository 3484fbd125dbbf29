// Package subscribers is the service that owns MAC clients, plans and
// fibre services. Today it serves the plans; the bus endpoints are thin
// adapters onto the plan book.
package subscribers

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
	"routerd.dev/services/subscribers/plan"
	"routerd.dev/shared/args"
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
	pub   *bus.Publisher
}

// New builds the service.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	st := store.New(d.KV, Name)
	return &Service{deps: d, plans: plan.NewBook(st, d.Now), pub: bus.NewPublisher(d.NC, Name, d.Log)}
}

// Run serves until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "MAC clients, plans and fibre services",
		Log:       s.deps.Log,
		Endpoints: s.Endpoints(),
	})
}

func (s *Service) listPlans(ctx context.Context, req *pb.Request) (int, any, error) {
	plans, err := s.plans.List(ctx)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"count": len(plans), "plans": plans}, nil
}

func (s *Service) putPlan(ctx context.Context, req *pb.Request) (int, any, error) {
	a := args.Parse(req.Args)
	in := plan.Input{Name: a.String("name"), Comment: a.String("comment")}
	var err error
	if in.DownMbps, in.HasDown, err = a.Int("down_mbps"); err != nil {
		return 0, nil, err
	}
	if in.UpMbps, in.HasUp, err = a.Int("up_mbps"); err != nil {
		return 0, nil, err
	}
	p, created, err := s.plans.Put(ctx, in)
	if err != nil {
		return 0, nil, err
	}
	status, msg, kind := http.StatusOK, "Plan updated", event.PlanUpdated
	if created {
		status, msg, kind = http.StatusCreated, "Plan created", event.PlanCreated
	}
	s.pub.Publish(kind, req, p)
	return status, map[string]any{"ok": true, "code": status, "message": msg, "plan": p, "olt": s.oltSync(ctx)}, nil
}

func (s *Service) deletePlan(ctx context.Context, req *pb.Request) (int, any, error) {
	// DELETE /plans/{name} or DELETE /plans with body name; the body wins.
	name := args.Parse(req.Args).String("name")
	if name == "" {
		name = req.Params["name"]
	}
	p, err := s.plans.Delete(ctx, name)
	if err != nil {
		return 0, nil, err
	}
	s.pub.Publish(event.PlanDeleted, req, p)
	return http.StatusOK, map[string]any{"ok": true, "code": http.StatusOK, "message": "Plan deleted", "olt": s.oltSync(ctx)}, nil
}

// oltSync is the `olt` field of plan answers: how many OLTs are brought in
// step in the background, or nil while no OLT is registered. No OLT can be
// registered until the olt service exists, so it is nil today.
func (s *Service) oltSync(ctx context.Context) any { return nil }

// clientsSummary gives GET /status its client counts.
func (s *Service) clientsSummary(ctx context.Context, req *pb.Request) (int, any, error) {
	n, err := s.plans.ClientCount(ctx)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, pb.ClientCounts{Total: n, PerNetwork: map[string]int64{}}, nil
}

// Endpoints are the service's operations by subject; Run serves them on the
// bus, and benchmarks call them directly to measure the bus hop.
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		{Subject: pb.PlansList, Handler: s.listPlans},
		{Subject: pb.PlansPut, Handler: s.putPlan},
		{Subject: pb.PlansDelete, Handler: s.deletePlan},
		{Subject: pb.ClientsSummary, Handler: s.clientsSummary},
	}
}
