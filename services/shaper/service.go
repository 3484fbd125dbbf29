// Package shaper is the service that holds each subscriber to its plan's
// rates: traffic control on subscriber-facing interfaces (an HTB root per
// interface and per /24 group below it, the download class chosen by an
// nftables map in the forward path) and upload policing in nftables (one
// limit object per subscriber, chosen by maps on its IPv4 and IPv6 source
// addresses). It acts only in its target
// namespace and only while it holds the host's etcd lock, like netcfg. The
// desired state is in etcd under /router/shaper/ (one key per subscriber,
// one per plan's rates); a change is stored first and applied second, one
// subscriber's classes and map elements only; the full build happens at
// start, in the reconcile that brings the kernel to the store both ways.
package shaper

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vishvananda/netlink"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix.
const Name = "shaper"

// Deps are what the service is built on.
type Deps struct {
	NC  *nats.Conn
	KV  *clientv3.Client
	NS  *netns.NS
	Log *slog.Logger
}

// Service is the shaper.
type Service struct {
	deps Deps
	st   *store.Store // unfenced; each term writes through st.Fenced(lock)

	mu    sync.Mutex // one writer: the store's records and the kernel
	w     *store.Store
	k     *kern
	nft   *nft
	state *state
	batch *batcher // netlink batches for plans.rates, made at first use
	// lastReq is when the last change request came; kick wakes the idle
	// tending of the spare classes (pool.go).
	lastReq time.Time
	kick    chan struct{}
	// counts is the reading side of counters.page (counters.go); kstat
	// the writer's socket for reading one class's counters (classBase).
	counts counting
	kstat  *statSock
}

// New builds the service with netlink and nftables handles in the target
// namespace.
func New(d Deps) (*Service, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	h, err := d.NS.Netlink()
	if err != nil {
		return nil, err
	}
	c, err := d.NS.NFTables()
	if err != nil {
		h.Close()
		return nil, err
	}
	sock, err := newNfSock(d.NS)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &Service{deps: d, st: store.New(d.KV, Name), k: &kern{nl: h}, nft: newNft(c, sock),
		kick: make(chan struct{}, 1)}, nil
}

// Run serves while it holds the host lock (store.Hold), standing by while
// another replica holds it, until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	defer s.k.nl.Close()
	defer s.nft.sock.close()
	defer s.counts.close()
	defer func() {
		s.mu.Lock()
		if s.batch != nil {
			s.batch.close()
		}
		if s.kstat != nil {
			s.kstat.close()
		}
		s.mu.Unlock()
	}()
	return store.Hold(ctx, s.deps.KV, Name+"/"+lockName(s.deps.NS), s.deps.Log, s.serve)
}

func (s *Service) serve(ctx context.Context, lock *store.Lock) error {
	s.mu.Lock()
	s.w = s.st.Fenced(lock)
	s.mu.Unlock()
	start := time.Now()
	res, err := s.Reconcile(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("shaper: reconciling: %w", err)
	}
	s.deps.Log.Info("shaping reconciled with the store", "subscribers", res.Subscribers,
		"added", res.Added, "changed", res.Changed, "removed", res.Removed, "problems", len(res.Problems),
		"took", time.Since(start).Round(time.Millisecond))
	for _, p := range res.Problems {
		s.deps.Log.Warn("subscriber not shaped", "problem", p)
	}
	tended := make(chan struct{})
	tctx, stop := context.WithCancel(ctx)
	go func() { defer close(tended); s.tend(tctx) }()
	defer func() { stop(); <-tended }()
	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "traffic shaping of subscribers by plan",
		Log: s.deps.Log, Endpoints: s.Endpoints(),
	})
}

// lockName scopes the lock to the namespace, as netcfg's does.
func lockName(ns *netns.NS) string {
	if ns.Path() == "" {
		return "host"
	}
	return fmt.Sprintf("ns-%x", []byte(ns.Path()))
}

// Netlink is the service's handle (for tests and benchmarks that read the
// kernel state).
func (s *Service) Netlink() *netlink.Handle { return s.k.nl }
