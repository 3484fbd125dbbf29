// Package netcfg is the service that owns the router's own network
// configuration in the kernel: today static routes and the interface count.
// It acts only in its target namespace, and only while it holds the host's
// etcd lock: a second replica on the same host stands by and takes over when
// the first stops or its lock lapses, and every etcd write is fenced by the
// lock, so a replica that lost it cannot write over its successor.
package netcfg

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/event"
	"routerd.dev/services/netcfg/link"
	"routerd.dev/services/netcfg/route"
	"routerd.dev/services/netcfg/vlan"
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
	// StateDir is netcfg's own directory (e.g. <state_dir>/netcfg): the
	// pending network apply's copy on disk. Empty: a directory under the
	// system's temporary directory (tests).
	StateDir string
	// NetworkDir is where the systemd-networkd files of the network
	// document are rendered: /etc/systemd/network on a router; the lab
	// uses <state_dir>/netcfg/network. Empty: <StateDir>/network.
	NetworkDir string
	// Confirm is how long an apply waits for confirm; 0 is the spec's
	// 120 s (only tests shorten it).
	Confirm time.Duration
	// ListenIP is the API's listen address: a change removing it is
	// refused.
	ListenIP string
}

// Service is the netcfg service.
type Service struct {
	deps Deps
	nl   *netlink.Handle
	st   *store.Store // unfenced; each term hands routes st.Fenced(lock)
	// routes is built once so the bus handlers can use it; it writes
	// through the fenced store of the term in progress.
	routes *route.Table
	// vlans holds the VLANs and addresses, writing like routes.
	vlans *vlan.Book
	pub   *bus.Publisher
	// net is the timed apply of the network document.
	net netState
	// diag reads the socket table (NETLINK_INET_DIAG) of the namespace.
	diag *netlink.Handle
	// bt is the reconcile's batch socket in the namespace.
	bt *link.Batcher
	// links is GET /status's interface count, reused for a second.
	links linkCount
}

// New builds the service with a netlink handle in the target namespace.
func New(d Deps) (*Service, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.StateDir == "" {
		dir, err := os.MkdirTemp("", "routerd-netcfg-")
		if err != nil {
			return nil, err
		}
		d.StateDir = dir
	}
	if d.NetworkDir == "" {
		d.NetworkDir = filepath.Join(d.StateDir, "network")
	}
	if err := os.MkdirAll(d.StateDir, 0o700); err != nil {
		return nil, err
	}
	nl, err := d.NS.Netlink()
	if err != nil {
		return nil, err
	}
	st := store.New(d.KV, Name)
	routes := route.NewTable(st, nl, d.Now)
	vlans := vlan.NewBook(st, nl, d.Now)
	vlans.Serving = dhcpServer{nc: d.NC, routes: routes}
	vlans.Uses = users{nc: d.NC, log: d.Log}
	vlans.Log = d.Log
	// The reconcile's batches go through a socket of their own in the
	// target namespace.
	var bt *link.Batcher
	if err := d.NS.Do(func() (err error) { bt, err = link.NewBatcher(); return err }); err != nil {
		nl.Close()
		return nil, fmt.Errorf("netcfg: batch socket: %w", err)
	}
	vlans.UseBatcher(bt)
	svc := &Service{deps: d, nl: nl, st: st, routes: routes, vlans: vlans, pub: bus.NewPublisher(d.NC, Name, d.Log), bt: bt}
	svc.net.started = d.Now()
	// sock_diag (the SSH sessions of the lock-out rules) needs a socket of
	// its own family, opened in the target namespace: the route handle
	// would open one in whatever namespace the thread is in.
	if svc.diag, err = netlink.NewHandleAt(vnetns.NsHandle(d.NS.FD()), unix.NETLINK_INET_DIAG); err != nil {
		nl.Close()
		bt.Close()
		return nil, fmt.Errorf("netcfg: sock_diag handle: %w", err)
	}
	// An ioctl socket in the target namespace for the drivers and speeds
	// of GET /network (ethtool).
	_ = d.NS.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			svc.net.eth.FD = fd
		}
		return err
	})
	return svc, nil
}

// Run serves while it holds the host lock, standing by while another
// replica holds it and again after losing it (store.Hold), until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	defer s.nl.Close()
	defer s.diag.Close()
	defer s.bt.Close()
	defer func() {
		s.net.mu.Lock()
		s.stopTimerLocked()
		s.net.mu.Unlock()
		if s.net.eth.FD > 0 {
			_ = unix.Close(s.net.eth.FD)
		}
	}()
	return store.Hold(ctx, s.deps.KV, Name+"/"+lockName(s.deps.NS), s.deps.Log, s.serve)
}

// serve is one term as the host's netcfg: reconcile the kernel with the
// stored routes, then answer on the bus until ctx ends (store.Hold ends it
// the moment the lock lapses). Every etcd write of the term is fenced by
// lock.
func (s *Service) serve(ctx context.Context, lock *store.Lock) error {
	fenced := s.st.Fenced(lock)
	s.routes.Use(fenced)
	s.vlans.Use(fenced)
	// The network document first: a pending apply found is settled, then
	// ports and bonds are brought to the store (VLANs sit on them).
	defer s.endTerm()
	if err := s.settleNetwork(ctx, fenced); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("netcfg: settling the network document: %w", err)
	}
	// Links and addresses first: routes may go out through them.
	t0 := time.Now()
	changes, problems, err := s.vlans.Reconcile(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("netcfg: reconciling links: %w", err)
	}
	for _, p := range problems {
		s.deps.Log.Warn("link or address not reconciled", "problem", p)
	}
	// The address index follows the namespace's addresses for the rest of
	// the term (conflict checks of new addresses read it instead of a
	// dump); it starts after the reconcile, whose thousands of changes it
	// would otherwise follow one notification at a time.
	go s.vlans.Follow(ctx, vnetns.NsHandle(s.deps.NS.FD()))
	if len(changes) > 0 || len(problems) > 0 {
		s.deps.Log.Info("links and addresses reconciled with the store", "changes", len(changes), "took", time.Since(t0).Round(time.Millisecond))
		if len(changes) <= 100 {
			s.deps.Log.Info("link and address changes", "changes", changes)
		}
		s.pub.Publish(event.LinkRestore, nil, map[string]any{"changes": changes, "problems": problems})
	}
	res, err := s.routes.Reconcile(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // lock lost or stopping: Hold knows which
		}
		return fmt.Errorf("netcfg: reconciling routes: %w", err)
	}
	for _, p := range res.Problems {
		s.deps.Log.Warn("route not reconciled", "problem", p)
	}
	for _, r := range res.Removed {
		s.deps.Log.Info("route of netcfg's protocol not stored: removed from the kernel", "route", r)
	}
	if len(res.Added) > 0 || len(res.Removed) > 0 {
		s.deps.Log.Info("kernel routes reconciled with the store", "added", len(res.Added), "removed", len(res.Removed))
	}
	if len(res.Added) > 0 || len(res.Removed) > 0 || len(res.Problems) > 0 {
		s.pub.Publish(event.RouteRestore, nil, map[string]any{
			"restored": len(res.Added), "removed": len(res.Removed), "problems": res.Problems})
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
