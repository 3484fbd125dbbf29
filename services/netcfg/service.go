// Package netcfg is the service that owns the router's own network
// configuration in the kernel: today static routes and the interface count.
// It acts only in its target namespace and takes an etcd lock so a second
// replica on the same host refuses to start instead of fighting the first.
package netcfg

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vishvananda/netlink"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/event"
	"routerd.dev/services/netcfg/route"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix.
const Name = "netcfg"

// Deps are what the service is built on.
type Deps struct {
	NC  *nats.Conn
	KV  *clientv3.Client
	NS  *netns.NS
	Log *slog.Logger
	Now func() time.Time
}

// Service is the netcfg service.
type Service struct {
	deps   Deps
	nl     *netlink.Handle
	routes *route.Table
	pub    *bus.Publisher
}

// New builds the service with a netlink handle in the target namespace.
func New(d Deps) (*Service, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	nl, err := d.NS.Netlink()
	if err != nil {
		return nil, err
	}
	st := store.New(d.KV, Name)
	return &Service{deps: d, nl: nl, routes: route.NewTable(st, nl, d.Now), pub: bus.NewPublisher(d.NC, Name, d.Log)}, nil
}

// Run takes the host lock, reconciles the kernel to etcd, then serves until
// ctx ends.
func (s *Service) Run(ctx context.Context) error {
	defer s.nl.Close()
	lock, err := store.TryLock(ctx, s.deps.KV, Name+"/"+lockName(s.deps.NS))
	if err != nil {
		return fmt.Errorf("netcfg: %w (is another netcfg running for this host?)", err)
	}
	defer lock.Unlock(context.WithoutCancel(ctx))

	n, problems, err := s.routes.Restore(ctx)
	if err != nil {
		return fmt.Errorf("netcfg: restoring routes: %w", err)
	}
	for _, p := range problems {
		s.deps.Log.Warn("route not restored", "problem", p)
	}
	if n > 0 {
		s.deps.Log.Info("routes restored into the kernel", "count", n)
		s.pub.Publish(event.RouteRestore, nil, map[string]any{"restored": n, "problems": problems})
	}

	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "router network configuration: routes, interfaces",
		Log:       s.deps.Log,
		Endpoints: s.Endpoints(),
	})
}

// lockName scopes the lock to the namespace, so the lab's namespace and
// the host's are separate "hosts".
func lockName(ns *netns.NS) string {
	if ns.Path() == "" {
		return "host"
	}
	return fmt.Sprintf("ns-%x", []byte(ns.Path()))
}
