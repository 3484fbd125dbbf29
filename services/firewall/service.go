// Package firewall is the service that owns the router's protection in
// nftables: suspension blocks (a suspended subscriber's forwarding cut by
// one set element), the allow-list of the management ports, the ban engine
// fed by the gateway's authentication failures, and their views. Its kernel
// state is its own table `inet routerd_firewall` (package nft); it never
// touches the ruleset or another table.
//
// Like netcfg it acts only while it holds the host's lock (store.Hold): one
// kernel owner per namespace, its etcd writes fenced by the lock. Each term
// starts by writing the table from the store in one transaction (the
// reconcile, both ways: what the kernel had and the store has not is gone,
// what the store has and the kernel lacked is back), then serves. Every
// change after that is stored first and applied second as element changes
// in one netlink transaction; a refused apply takes the stored change out.
package firewall

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/services/firewall/nft"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix.
const Name = "firewall"

// MonitorPort is the OLT monitor's port, behind the same allow-list as the
// API (Document 1).
const MonitorPort = 8881

// Deps are what the service is built on.
type Deps struct {
	NC  *nats.Conn
	KV  *clientv3.Client
	NS  *netns.NS
	Log *slog.Logger
	Now func() time.Time
	// APIPort and MonitorPort are the management ports the allow-list and
	// the bans guard (MonitorPort 8881 when 0; an API port of 0, unknown,
	// guards the monitor's only).
	APIPort, MonitorPort int
	// Bans tunes the ban engine; the zero value is fail2ban's defaults.
	Bans BanConfig
	// SSHLog, when set, is the log sshd writes its failures to (e.g.
	// /var/log/auth.log): a second jail, sshd, bans on TCP 22 with the
	// same limits.
	SSHLog string
}

// Service is the firewall service.
type Service struct {
	deps  Deps
	ports []int
	k     *nft.Kernel
	st    *store.Store
	pub   *bus.Publisher

	// mu serialises changes; the maps below mirror the store during a
	// term (the holder of the lock is the only writer).
	mu      sync.Mutex
	w       *store.Store // the term's fenced store
	blocks  map[string]blockRec
	allow   map[netip.Prefix]allowRec
	bans    *banEngine
	sshBans *banEngine // nil without Deps.SSHLog
	spoof   *spoofer
}

// New builds the service with an nftables connection in the target
// namespace.
func New(d Deps) (*Service, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.MonitorPort == 0 {
		d.MonitorPort = MonitorPort
	}
	var ports []int
	for _, p := range []int{d.APIPort, d.MonitorPort} {
		if p > 0 && p < 65536 && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}

	k, err := nft.Open(d.NS)
	if err != nil {
		return nil, err
	}
	s := &Service{deps: d, ports: ports, k: k, st: store.New(d.KV, Name), pub: bus.NewPublisher(d.NC, Name, d.Log)}
	s.bans = newBanEngine(s, d.Bans)
	if d.SSHLog != "" && !d.Bans.Off {
		s.sshBans = newBanEngine(s, d.Bans)
		s.sshBans.jail, s.sshBans.dir, s.sshBans.set4, s.sshBans.set6 = SSHJail, "bans-"+SSHJail, nft.SetSSHBan4, nft.SetSSHBan6
	}
	if s.spoof, err = newSpoofer(s); err != nil {
		k.Close()
		return nil, err
	}
	return s, nil
}

// Run serves while it holds the host lock, standing by while another
// replica holds it (store.Hold), until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	defer s.k.Close()
	defer s.spoof.k.Close()
	return store.Hold(ctx, s.deps.KV, Name+"/"+lockName(s.deps.NS), s.deps.Log, s.serve)
}

// serve is one term: load the store, write the table from it, serve.
func (s *Service) serve(ctx context.Context, lock *store.Lock) error {
	if err := s.start(ctx, s.st.Fenced(lock)); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for _, e := range s.jails() {
		go e.expire(ctx)
	}
	if s.sshBans != nil {
		go s.followSSH(ctx)
	}
	// Anti-spoofing: its settings applied with what is known, then the
	// clients and leases followed; the log read from the kernel.
	if err := s.spoof.start(ctx); err != nil {
		s.deps.Log.Error("anti-spoofing rules not applied at start", "err", err)
	}
	go s.spoof.follow(ctx)
	go s.spoof.readLog(ctx)
	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "router protection: suspension blocks, allow-list, bans",
		Log:       s.deps.Log,
		Endpoints: s.Endpoints(),
	})
}

// start loads the stored state and writes the table from it (exported to
// tests through Start).
func (s *Service) start(ctx context.Context, w *store.Store) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
	blocks, err := s.loadBlocks(ctx)
	if err != nil {
		return fmt.Errorf("firewall: loading blocks: %w", err)
	}
	allow, err := s.loadAllow(ctx)
	if err != nil {
		return fmt.Errorf("firewall: loading the allow-list: %w", err)
	}
	for _, e := range s.jails() {
		if err := e.load(ctx); err != nil {
			return fmt.Errorf("firewall: loading bans: %w", err)
		}
	}
	s.blocks, s.allow = blocks, allow
	st := s.desired()
	before := s.kernelCounts()
	if err := s.k.Rebuild(st); err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	s.deps.Log.Info("firewall table written from the store", "table", nft.Table,
		"blocks", len(s.blocks), "allow", len(s.allow), "bans", s.bans.count(), "kernel_before", before)
	return nil
}

// desired is the whole table from the maps.
func (s *Service) desired() nft.State {
	st := nft.State{Protected: len(s.allow) > 0}
	for _, p := range s.ports {
		st.Ports = append(st.Ports, uint16(p))
	}
	st.Block4, st.Block6 = s.blockElements()
	st.Allow4 = s.allowElements()
	st.Ban4, st.Ban6 = s.bans.elements()
	if s.sshBans != nil {
		st.SSHBan4, st.SSHBan6 = s.sshBans.elements()
	}
	return st
}

// kernelCounts says what the table held before a rebuild (for the log):
// nil when it was absent.
func (s *Service) kernelCounts() map[string]int {
	ok, err := s.k.Exists()
	if err != nil || !ok {
		return nil
	}
	out := map[string]int{}
	for _, set := range []string{nft.SetBlock4, nft.SetBlock6, nft.SetAllow4, nft.SetBan4, nft.SetBan6} {
		if e, err := s.k.Elements(set); err == nil {
			out[set] = len(e)
		}
	}
	return out
}

// lockName scopes the lock to the namespace, so the lab's namespace and
// the host's are separate "hosts".
func lockName(ns *netns.NS) string {
	if ns.Path() == "" {
		return "host"
	}
	return fmt.Sprintf("ns-%x", []byte(ns.Path()))
}
