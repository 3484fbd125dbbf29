package dhcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix (/router/dhcp/).
const Name = "dhcp"

// Stored documents under /router/dhcp/ (the leases live under leases/, see
// package lease).
const (
	// ConfigDoc is the engine configuration, a config.Config as JSON: the
	// desired state, watched; each change is applied with Reconfigure.
	ConfigDoc = "config"
	// AppliedDoc is a copy of the last configuration applied, with its
	// revision: when the stored one is refused at start, the engine serves
	// this instead of nothing, so a bad edit followed by a restart does not
	// take DHCP away from every subscriber.
	AppliedDoc = "config_applied"
)

// Lease list paging: a NATS message is at most 1 MiB and a lease is about
// 300 bytes of JSON.
const (
	defaultLeasePage = 1000
	maxLeasePage     = 1000
)

// ServiceDeps are what the dhcp service is built on.
type ServiceDeps struct {
	NC *nats.Conn
	KV *clientv3.Client
	// NS is the namespace to serve in.
	NS  *netns.NS
	Log *slog.Logger
	Now func() time.Time
	// EventBuffer bounds the events waiting for the bus; 0 is DefaultEventBuffer.
	EventBuffer int
	// UnknownDeviceWindow: at most one unknown_device event per interface
	// and MAC in this window; 0 is DefaultUnknownDeviceWindow.
	UnknownDeviceWindow time.Duration
	// EventReport is how often dropped and suppressed event counts are
	// logged; 0 is DefaultEventReport.
	EventReport time.Duration
	// ListenRetry is passed to the engine (Deps.ListenRetry).
	ListenRetry time.Duration
	// PD is the router configuration's delegation pool (pd_pool, pd_len,
	// pd_slice, pd_reserve), used while the stored configuration has none.
	PD PDDefaults
}

// Service runs the DHCP engine as a bus service. One engine serves a host
// (a target namespace): the service holds the etcd lock
// /router/locks/dhcp/<host>. A second replica for the same host does not
// refuse to start; it stands by, says so in the log, and takes over when
// the holder stops or dies (the lock lapses store.LockTTL after its holder
// stops answering), loading the leases from etcd. A replica whose lock
// lapses under it (etcd unreachable) stops serving at once and stands by
// again. Only the serving replica answers on the bus, so GET /status shows
// dhcp_service running exactly when an engine serves.
type Service struct {
	d      ServiceDeps
	st     *store.Store
	wst    *store.Store // st fenced by the host lock of the current term
	events *busEvents

	// cfgMu serialises changes of the served configuration made through
	// the API (read, change, apply, store).
	cfgMu sync.Mutex

	mu    sync.Mutex
	eng   *Engine // nil while standing by
	state ConfigState

	// resvApplied is the etcd revision up to which the engine holds the
	// stored reservations (the watch's last event, or the last load): an
	// import waits for its own writes to be applied instead of loading
	// every reservation again.
	resvApplied atomic.Int64
}

// ConfigState says which stored configuration is in force.
type ConfigState struct {
	// Revision is the etcd revision of the configuration in force; 0 when
	// none is stored (the engine serves nothing).
	Revision int64 `json:"revision"`
	// Source is "stored", "last applied" (the stored one was refused at
	// start) or "none".
	Source string `json:"source"`
	// Refused is the last stored configuration that was refused, if any
	// came after the one in force.
	Refused *Refusal `json:"refused,omitempty"`
}

// Refusal is a stored configuration the engine would not apply.
type Refusal struct {
	Revision int64     `json:"revision"`
	Error    string    `json:"error"`
	At       time.Time `json:"at"`
}

type appliedDoc struct {
	Revision int64         `json:"revision"`
	Config   config.Config `json:"config"`
}

// NewService builds the service; nothing runs until Run.
func NewService(d ServiceDeps) (*Service, error) {
	if d.NC == nil || d.KV == nil || d.NS == nil {
		return nil, errors.New("dhcp service: NATS, etcd and a target namespace are required")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	pub := bus.NewPublisher(d.NC, Name, d.Log)
	return &Service{d: d, st: store.New(d.KV, Name),
		events: newBusEvents(pub, d.Log, d.Now, d.EventBuffer, d.UnknownDeviceWindow, d.EventReport)}, nil
}

// Run serves while it holds the host lock, standing by while another
// engine holds it and again after losing it (store.Hold), until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	evCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	evDone := make(chan struct{})
	go func() { s.events.Run(evCtx); close(evDone) }()
	defer func() { stopEvents(); <-evDone }()

	return store.Hold(ctx, s.d.KV, Name+"/"+lockName(s.d.NS), s.d.Log, s.serve)
}

// serve is one term as the host's engine: load the configuration, run the
// engine, follow the stored configuration and answer on the bus until ctx
// ends, which store.Hold does the moment the lock lapses.
func (s *Service) serve(ctx context.Context, lock *store.Lock) error {
	// Every write of this term is conditional on still holding the lock.
	s.wst = s.st.Fenced(lock)
	if err := s.migrate(ctx); err != nil {
		return err
	}
	cfg, from, err := s.loadConfig(ctx)
	if err != nil {
		return err
	}
	eng, err := New(cfg, Deps{Store: lease.NewEtcdStore(s.d.KV).Fenced(lock.Fence()), NetNS: s.d.NS, Events: s.events,
		Log: s.d.Log, Now: s.d.Now, ListenRetry: s.d.ListenRetry})
	if err != nil {
		return err
	}
	resRev, err := s.loadReservationsAt(ctx, eng)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.eng = eng
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.eng = nil
		s.mu.Unlock()
	}()

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return eng.Run(gctx) })
	g.Go(func() error { s.watch(gctx, eng, from); return nil })
	g.Go(func() error { s.watchReservations(gctx, eng, resRev); return nil })
	g.Go(func() error {
		return bus.Run(gctx, s.d.NC, bus.ServiceConfig{
			Name: Name, Version: "1.0.0", Description: "DHCPv4, DHCPv6, prefix delegation and router advertisements",
			Log: s.d.Log, Endpoints: s.Endpoints(),
		})
	})
	return g.Wait()
}

// loadConfig reads the stored configuration. A refused one (unparsable or
// invalid) is logged and the last applied copy is served instead; with
// neither the engine serves nothing. from is where the watch starts.
func (s *Service) loadConfig(ctx context.Context) (cfg config.Config, from int64, err error) {
	resp, err := s.d.KV.Get(ctx, s.st.Key(ConfigDoc))
	if err != nil {
		return cfg, 0, fmt.Errorf("dhcp: reading the configuration: %w", err)
	}
	from = resp.Header.Revision + 1
	if len(resp.Kvs) == 0 {
		s.d.Log.Info("no dhcp configuration stored: serving nothing until one is", "key", s.st.Key(ConfigDoc))
		s.setState(ConfigState{Source: "none"})
		return cfg, from, nil
	}
	kv := resp.Kvs[0]
	c, err := decodeConfig(kv.Value)
	if err == nil {
		s.setState(ConfigState{Revision: kv.ModRevision, Source: "stored"})
		s.saveApplied(ctx, kv.ModRevision, c)
		return c, from, nil
	}
	ref := &Refusal{Revision: kv.ModRevision, Error: err.Error(), At: s.d.Now()}
	a, _, aerr := store.Get[appliedDoc](ctx, s.st, s.st.Key(AppliedDoc))
	if aerr == nil {
		if _, verr := decodeConfig(mustJSON(a.Config)); verr == nil {
			s.d.Log.Error("stored dhcp configuration refused; serving the last applied one",
				"revision", kv.ModRevision, "err", err, "applied_revision", a.Revision)
			s.setState(ConfigState{Revision: a.Revision, Source: "last applied", Refused: ref})
			return a.Config, from, nil
		}
	}
	s.d.Log.Error("stored dhcp configuration refused and no earlier one to fall back on: serving nothing",
		"revision", kv.ModRevision, "err", err)
	s.setState(ConfigState{Source: "none", Refused: ref})
	return config.Config{}, from, nil
}

// watch applies each change of the stored configuration until ctx ends.
// After a broken watch (compaction, leader change) it reads the document
// again, so no change is missed.
func (s *Service) watch(ctx context.Context, eng *Engine, from int64) {
	key := s.st.Key(ConfigDoc)
	for ctx.Err() == nil {
		wch := s.d.KV.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithRev(from))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				s.d.Log.Warn("dhcp configuration watch interrupted; reading it again", "err", err)
				break
			}
			for _, ev := range resp.Events {
				s.apply(ctx, eng, ev.Kv.ModRevision, ev.Type == clientv3.EventTypeDelete, ev.Kv.Value)
				from = ev.Kv.ModRevision + 1
			}
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		resp, err := s.d.KV.Get(ctx, key)
		if err != nil {
			continue // retry the watch from where it was
		}
		cur := s.State().Revision
		switch {
		case len(resp.Kvs) == 0 && cur != 0:
			s.apply(ctx, eng, resp.Header.Revision, true, nil)
		case len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision != cur:
			s.apply(ctx, eng, resp.Kvs[0].ModRevision, false, resp.Kvs[0].Value)
		}
		from = resp.Header.Revision + 1
	}
}

// apply reconfigures the engine with one stored version; a refused one
// is logged and recorded, and the configuration in force stays.
func (s *Service) apply(ctx context.Context, eng *Engine, rev int64, deleted bool, raw []byte) {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	if !deleted && rev <= s.State().Revision {
		return // applied already, by the API change that stored it
	}
	var cfg config.Config
	if deleted {
		s.d.Log.Warn("dhcp configuration deleted from the store: serving nothing", "revision", rev)
	} else {
		var err error
		if cfg, err = decodeConfig(raw); err != nil {
			s.refuse(rev, err)
			return
		}
	}
	if err := eng.Reconfigure(cfg); err != nil {
		s.refuse(rev, err)
		return
	}
	if deleted {
		s.setState(ConfigState{Source: "none"})
		return
	}
	s.setState(ConfigState{Revision: rev, Source: "stored"})
	s.saveApplied(ctx, rev, cfg)
	s.d.Log.Info("dhcp configuration applied", "revision", rev,
		"networks", len(cfg.Networks), "networks6", len(cfg.Networks6), "clients", len(cfg.Clients), "services", len(cfg.Services))
}

func (s *Service) refuse(rev int64, err error) {
	s.d.Log.Error("stored dhcp configuration refused; the previous one stays in force", "revision", rev, "err", err)
	s.mu.Lock()
	s.state.Refused = &Refusal{Revision: rev, Error: err.Error(), At: s.d.Now()}
	s.mu.Unlock()
}

// saveApplied keeps the copy loadConfig falls back on. Best effort: the
// configuration is in force whether or not the copy is written.
func (s *Service) saveApplied(ctx context.Context, rev int64, cfg config.Config) {
	cur, _, err := store.Get[appliedDoc](ctx, s.st, s.st.Key(AppliedDoc))
	if err == nil && cur.Revision == rev {
		return
	}
	if _, err := s.wst.Txn().Put(s.st.Key(AppliedDoc), appliedDoc{Revision: rev, Config: cfg}).Commit(ctx); err != nil {
		s.d.Log.Warn("cannot keep a copy of the applied dhcp configuration", "revision", rev, "err", err)
	}
}

// decodeConfig parses a stored configuration strictly (a misspelt field is
// an error, not a silently missing setting) and validates it whole.
func decodeConfig(raw []byte) (config.Config, error) {
	var c config.Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("unparsable configuration: %w", err)
	}
	if err := c.WithDefaults().Validate(); err != nil {
		return c, fmt.Errorf("invalid configuration: %w", err)
	}
	return c, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (s *Service) setState(st ConfigState) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
}

// State returns which stored configuration is in force.
func (s *Service) State() ConfigState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *Service) engine() (*Engine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eng == nil {
		return nil, apierr.Unavailable("the dhcp engine is standing by")
	}
	return s.eng, nil
}

// lockName scopes the lock to the namespace, as netcfg does, so the lab's
// namespace and the host's are separate "hosts".
func lockName(ns *netns.NS) string {
	if ns.Path() == "" {
		return "host"
	}
	return fmt.Sprintf("ns-%x", []byte(ns.Path()))
}
