// Package graph is the service that watches the router's traffic for the
// operator: the SNMP agent (GET and POST /snmp; the agent itself, v2c,
// read-only) and the traffic graphs (/graph/*), with the samples they are
// drawn from. It owns no kernel state: it reads counters (netlink, the
// other services over the bus) and serves them.
package graph

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix.
const Name = "graph"

// Deps are what the service is built on.
type Deps struct {
	NC  *nats.Conn
	KV  *clientv3.Client
	Log *slog.Logger
	// NS is the router's network namespace: the SNMP agent listens in it
	// and interface counters are read from it.
	NS *netns.NS
	// StateDir is the service's own directory (routerd gives it
	// state_dir/graph): the samples' files, the sealing key of the SNMP
	// community.
	StateDir string
	Now      func() time.Time
	// SampleEvery is the graphs' sampling period; 0 is a minute (the
	// spec's "samples are collected every minute").
	SampleEvery time.Duration
	// SNMPPort is the agent's UDP port; 0 is 161.
	SNMPPort int
}

// Service is the graph service.
type Service struct {
	deps Deps
	st   *store.Store
	// snmp is the SNMP agent's state (snmp.go), graphs the sampler's and
	// the graphs' (graphs.go).
	snmp   snmpArea
	graphs graphArea
}

// New returns the service.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.SampleEvery == 0 {
		d.SampleEvery = time.Minute
	}
	if d.SNMPPort == 0 {
		d.SNMPPort = 161
	}
	return &Service{deps: d, st: store.New(d.KV, Name)}
}

// Run serves until ctx ends: the bus endpoints, and beside them the SNMP
// agent (snmp.go) and the sampler the graphs are drawn from (graphs.go).
func (s *Service) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, f := range []func(context.Context){s.runSNMP, s.runSampler} {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "SNMP agent and traffic graphs",
		Log:       s.deps.Log,
		Endpoints: s.Endpoints(),
	})
}

// Endpoints are the service's operations.
func (s *Service) Endpoints() []bus.Endpoint {
	return append(s.snmpEndpoints(), s.graphEndpoints()...)
}
