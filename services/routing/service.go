// Package routing is the service that owns BGP and OSPF: it keeps the
// settings in etcd (/router/routing/settings), renders BIRD 2's
// configuration from them, checks it with the daemon (`bird -p`), and
// loads it into a BIRD it runs itself (its own process, configuration,
// control socket and pid file under the state directory, in the target
// network namespace). Every change but blackhole-add/del made while BGP or
// OSPF is on waits for confirm: the previous settings and the deadline are
// stored with the change (/router/routing/pending), so a restart during
// the window undoes it at start when the deadline has passed and waits
// out the rest otherwise.
//
// Like netcfg it runs once per host: a second replica stands by behind
// the host lock (store.Hold), and every write is fenced by it.
package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/services/routing/bird"
	"routerd.dev/services/routing/conf"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/seal"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix.
const Name = "routing"

// ConfirmWindow is how long a change waits for confirm (Document 1,
// Limits: 120 s).
const ConfirmWindow = 120 * time.Second

// Deps are what the service is built on.
type Deps struct {
	NC  *nats.Conn
	KV  *clientv3.Client
	NS  *netns.NS
	Log *slog.Logger
	// Dir holds BIRD's files and the sealing key; e.g.
	// <state_dir>/routing.
	Dir string
	// Confirm is the confirm window; 0 is ConfirmWindow (tests shorten it).
	Confirm time.Duration
	// BirdBin is the daemon's binary; "" is "bird" on PATH.
	BirdBin string
	// RTR is the RPKI cache (host:port) BIRD asks while rpki is on; ""
	// is 127.0.0.1:8282 (stayrtr's default).
	RTR string
	Now func() time.Time
}

// Pending is the change waiting for confirm, as stored.
type Pending struct {
	Previous conf.Settings `json:"previous"`
	// DeadlineMS is the deadline in unix milliseconds.
	DeadlineMS int64  `json:"deadline_ms"`
	What       string `json:"what"`
	By         string `json:"by"`
}

// Service is the routing service.
type Service struct {
	deps   Deps
	st     *store.Store // unfenced: reads
	daemon *bird.Daemon
	pub    *bus.Publisher

	mu    sync.Mutex   // one change at a time; guards the fields below
	fst   *store.Store // the term's fenced store; nil between terms
	timer *time.Timer
	term  context.Context
	key   *seal.Key // peer passwords' sealing key
	// refused is why the stored settings could not be loaded at start
	// (nil when they were, or once a change loads).
	refused atomic.Pointer[error]
}

// New builds the service.
func New(d Deps) (*Service, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Confirm <= 0 {
		d.Confirm = ConfirmWindow
	}
	if d.Dir == "" {
		return nil, errors.New("routing: Dir is required")
	}
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return nil, err
	}
	key := seal.New(filepath.Join(d.Dir, "seal.key"))
	if err := key.Load(); err != nil {
		return nil, err
	}
	return &Service{
		deps: d, st: store.New(d.KV, Name), key: key,
		daemon: &bird.Daemon{Bin: d.BirdBin, Dir: d.Dir, NSPath: d.NS.Path(), Log: d.Log},
		pub:    bus.NewPublisher(d.NC, Name, d.Log),
	}, nil
}

func (s *Service) settingsKey() string { return s.st.Key("settings") }
func (s *Service) pendingKey() string  { return s.st.Key("pending") }

// Run serves while it holds the host lock (store.Hold).
func (s *Service) Run(ctx context.Context) error {
	return store.Hold(ctx, s.deps.KV, Name+"/"+lockName(s.deps.NS), s.deps.Log, s.serve)
}

func lockName(ns *netns.NS) string {
	if ns.Path() == "" {
		return "host"
	}
	return fmt.Sprintf("ns-%x", []byte(ns.Path()))
}

// serve is one term: settle a change left pending by a previous term
// (undo it when its deadline passed, re-arm the timer otherwise), write
// the configuration, run BIRD, answer on the bus.
func (s *Service) serve(ctx context.Context, lock *store.Lock) error {
	s.mu.Lock()
	s.fst, s.term = s.st.Fenced(lock), ctx
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		s.fst, s.term = nil, nil
		s.mu.Unlock()
	}()

	if err := s.settle(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := s.installStored(ctx); err != nil {
		return err
	}

	dctx, stopDaemon := context.WithCancel(ctx)
	daemonDone := make(chan struct{}) // closed when the daemon's runner ends
	up := make(chan struct{})
	var upOnce sync.Once
	if _, err := s.daemon.Installed(); err == nil {
		go func() {
			// Each time a daemon comes up (first start, after a crash) it
			// loads what is stored now: a timer may have undone a change
			// while it was starting.
			defer close(daemonDone)
			err := s.daemon.Run(dctx, func() {
				if err := s.installStored(dctx); err == nil {
					s.mu.Lock()
					defer s.mu.Unlock()
					cctx, cancel := context.WithTimeout(dctx, 10*time.Second)
					defer cancel()
					if err := s.daemon.Configure(cctx); err != nil && dctx.Err() == nil {
						s.deps.Log.Error("BIRD did not load the stored settings", "err", err)
					}
				}
				upOnce.Do(func() { close(up) })
			})
			if err != nil {
				s.deps.Log.Error("BIRD cannot run", "err", err)
			}
		}()
	} else {
		s.deps.Log.Warn("BIRD is not installed: routing changes are refused", "err", err)
		close(daemonDone)
	}
	defer func() { stopDaemon(); <-daemonDone }()
	// Serve once BIRD answers, so that the first changes find it; after
	// the bound (a daemon failing to start) serve anyway: GET /bgp says why.
	select {
	case <-up:
	case <-daemonDone:
	case <-ctx.Done():
		return nil
	case <-time.After(10 * time.Second):
		s.deps.Log.Warn("BIRD not answering yet; serving anyway")
	}
	go s.watchSessions(dctx)

	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "BGP and OSPF through BIRD",
		Log: s.deps.Log, Endpoints: s.Endpoints(),
	})
}

// installStored writes the configuration of the stored settings, under
// the change lock so that no change or undo interleaves.
func (s *Service) installStored(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, _, err := s.load(ctx)
	if err != nil {
		return err
	}
	if err := s.install(cur); err != nil {
		// The stored settings no longer load (a daemon upgrade? a lost
		// seal.key?): run the daemon empty rather than not at all; GET
		// /bgp says why in bird_error until a change loads.
		s.deps.Log.Error("stored routing settings refused by BIRD; starting it without them", "err", err)
		empty, _ := conf.Render(conf.Settings{}, conf.Options{})
		_ = s.daemon.Install(empty)
		e := fmt.Errorf("the stored settings are not loaded: %w", err)
		s.refused.Store(&e)
		return nil
	}
	s.refused.Store(nil)
	return nil
}

// load reads the settings (zero settings when none are stored).
func (s *Service) load(ctx context.Context) (conf.Settings, int64, error) {
	v, rev, err := store.Get[conf.Settings](ctx, s.st, s.settingsKey())
	if errors.Is(err, store.ErrNotFound) {
		v, rev, err = conf.Settings{}, 0, nil
	}
	v.Normal()
	return v, rev, err
}

func (s *Service) loadPending(ctx context.Context) (*Pending, int64, error) {
	v, rev, err := store.Get[Pending](ctx, s.st, s.pendingKey())
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return &v, rev, nil
}

// render renders s for the daemon (passwords in clear).
func (s *Service) render(v conf.Settings) (string, error) {
	// BIRD logs to stderr, which the daemon passes into routerd's log.
	return conf.Render(v, conf.Options{RTR: s.deps.RTR, Open: s.open})
}

// install renders, checks and writes the configuration file.
func (s *Service) install(v conf.Settings) error {
	text, err := s.render(v)
	if err != nil {
		return err
	}
	if err := s.daemon.Check(text); err != nil {
		return err
	}
	return s.daemon.Install(text)
}

// load into the running daemon: install, then configure.
func (s *Service) apply(ctx context.Context, v conf.Settings) error {
	if err := s.install(v); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return s.daemon.Configure(cctx)
}

// settle handles a change left pending by a previous term: undone now
// when its deadline passed, the timer armed for the rest otherwise.
func (s *Service) settle(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, _, err := s.loadPending(ctx)
	if err != nil || p == nil {
		return err
	}
	left := time.UnixMilli(p.DeadlineMS).Sub(s.deps.Now())
	if left <= 0 {
		s.deps.Log.Warn("a routing change was still waiting for confirm past its deadline: undoing it", "what", p.What, "by", p.By)
		// Stored only: serve writes the restored configuration before it
		// starts the daemon.
		return s.undoLocked(ctx, "the confirm deadline passed while the service was down", true, false)
	}
	s.deps.Log.Info("a routing change is waiting for confirm: timer re-armed", "what", p.What, "left", left.Round(time.Millisecond))
	s.armLocked(left)
	return nil
}

func (s *Service) armLocked(d time.Duration) {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(d, s.expire)
}

// expire is the timer: the waiting change is undone by itself.
func (s *Service) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := s.term
	if ctx == nil || ctx.Err() != nil {
		return
	}
	p, _, err := s.loadPending(ctx)
	if err != nil || p == nil {
		return
	}
	if left := time.UnixMilli(p.DeadlineMS).Sub(s.deps.Now()); left > 0 {
		s.armLocked(left)
		return
	}
	if err := s.undoLocked(ctx, "not confirmed before the deadline", true, true); err != nil {
		s.deps.Log.Error("undoing the unconfirmed routing change failed", "err", err)
		s.armLocked(5 * time.Second) // try again
	}
}

// undoLocked restores the previous settings (keeping the blackholes,
// which never wait) in etcd and, when load, in the daemon.
func (s *Service) undoLocked(ctx context.Context, why string, publish, load bool) error {
	p, prev, err := s.loadPending(ctx)
	if err != nil {
		return err
	}
	if p == nil {
		return apierr.Conflict("no change is waiting for confirm")
	}
	cur, rev, err := s.load(ctx)
	if err != nil {
		return err
	}
	restore := p.Previous.Clone()
	restore.Normal()
	restore.Blackhole = cur.Blackhole
	if _, err := s.fst.Txn().IfRevision(s.settingsKey(), rev).IfRevision(s.pendingKey(), prev).
		Put(s.settingsKey(), restore).Delete(s.pendingKey()).Commit(ctx); err != nil {
		return storeErr(err)
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	var aerr error
	if load {
		aerr = s.apply(ctx, restore)
	}
	if aerr != nil {
		s.deps.Log.Error("previous routing settings restored in etcd but not loaded into BIRD", "err", aerr)
	}
	s.deps.Log.Info("routing change undone", "what", p.What, "by", p.By, "why", why)
	if publish {
		s.pub.Publish(api.EventBGPUndone, nil, map[string]any{"op": p.What, "by": p.By, "why": why})
	}
	return aerr
}

func storeErr(err error) error {
	switch {
	case errors.Is(err, store.ErrLockLost):
		return apierr.Unavailable("the routing service lost its host lock; try again")
	case errors.Is(err, store.ErrConflict):
		return apierr.Conflict("the routing settings changed meanwhile; try again")
	}
	return err
}
