// Package node composes one routerd process: the bus and the store (embedded
// or external), the target namespace, and whichever services the
// configuration selects. The all-in-one binary and every split process of a
// deployment run through here, so they differ only in configuration.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"routerd.dev/gateway"
	"routerd.dev/services/cgnat"
	"routerd.dev/services/dhcp"
	"routerd.dev/services/firewall"
	"routerd.dev/services/graph"
	"routerd.dev/services/netcfg"
	"routerd.dev/services/olt"
	"routerd.dev/services/routing"
	"routerd.dev/services/shaper"
	"routerd.dev/services/subscribers"
	"routerd.dev/services/system"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/config"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

// Options are the process-level choices that are not configuration.
type Options struct {
	Log *slog.Logger
	// Listener, when set, is used for the API instead of listening on the
	// configured address (tests pass one on port 0).
	Listener net.Listener
	// Ready is called with the API address once the API listens and the
	// services this process runs have registered (or readyWait passed).
	Ready func(apiAddr string)
	// Seed, when set, runs once the store is reachable and before any
	// service starts (the lab stores its starting configuration).
	Seed func(ctx context.Context, kv *clientv3.Client) error
	// Provision, when set, runs once the services this process runs are
	// up and before the API opens: the lab makes its starting
	// configuration through the services' own operations with it.
	Provision func(ctx context.Context, nc *nats.Conn) error
}

// Run starts everything cfg selects and blocks until ctx ends or a service
// fails; then it stops them all.
func Run(ctx context.Context, cfg config.Config, opt Options) error {
	log := opt.Log
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.StateDir, 0o750); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}

	var ns *server.Server
	if cfg.NATSURL == "" {
		var err error
		ns, err = bus.StartEmbedded(bus.EmbedConfig{StoreDir: filepath.Join(cfg.StateDir, "nats"), Listen: cfg.NATSListen})
		if err != nil {
			return err
		}
		defer ns.Shutdown()
		log.Info("embedded NATS started", "listen", orInProcess(cfg.NATSListen))
	}
	nc, err := bus.Connect("routerd", cfg.NATSURL, ns)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := bus.EnsureStream(ctx, nc); err != nil {
		return err
	}

	var kv *clientv3.Client
	if cfg.Runs(subscribers.Name) || cfg.Runs(cgnat.Name) || cfg.Runs(netcfg.Name) || cfg.Runs(dhcp.Name) || cfg.Runs(olt.Name) || cfg.Runs(system.Name) || cfg.Runs(routing.Name) || cfg.Runs(firewall.Name) || cfg.Runs(shaper.Name) || cfg.Runs(graph.Name) {
		if len(cfg.EtcdEndpoints) == 0 {
			e, err := store.StartEmbedded(ctx, store.EmbedConfig{Dir: filepath.Join(cfg.StateDir, "etcd"), ClientAddr: cfg.EtcdListen})
			if err != nil {
				return err
			}
			defer e.Close()
			kv = e.Client()
			log.Info("embedded etcd started", "client_url", e.ClientURL)
		} else if kv, err = store.Dial(cfg.EtcdEndpoints); err != nil {
			return err
		}
		defer kv.Close()
		if opt.Seed != nil {
			if err := opt.Seed(ctx, kv); err != nil {
				return err
			}
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	var started []string
	run := func(name string, f func(context.Context) error) {
		started = append(started, name)
		g.Go(func() error {
			if err := f(gctx); err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
		log.Info("service started", "service", name)
	}

	if cfg.Runs(subscribers.Name) {
		// Its own handle on the target namespace: it reads the neighbour
		// table (online clients).
		sns, err := netns.Open(cfg.Netns)
		if err != nil {
			return err
		}
		defer sns.Close()
		svc := subscribers.New(subscribers.Deps{NC: nc, KV: kv, NS: sns, Log: log.With("service", subscribers.Name)})
		run(subscribers.Name, svc.Run)
	}
	// The kernel services share one handle on the target namespace.
	var target *netns.NS
	if cfg.Runs(netcfg.Name) || cfg.Runs(cgnat.Name) || cfg.Runs(dhcp.Name) || cfg.Runs(routing.Name) || cfg.Runs(firewall.Name) || cfg.Runs(shaper.Name) {
		if target, err = netns.Open(cfg.Netns); err != nil {
			return err
		}
		defer target.Close()
	}
	if cfg.Runs(netcfg.Name) {
		// The network document's files go to the host's networkd
		// directory only when netcfg runs the host's own namespace.
		netDir := cfg.NetworkDir
		if netDir == "" {
			netDir = "/etc/systemd/network"
			if cfg.Netns != "" {
				netDir = filepath.Join(cfg.StateDir, "netcfg", "network")
			}
		}
		svc, err := netcfg.New(netcfg.Deps{NC: nc, KV: kv, NS: target, Log: log.With("service", netcfg.Name),
			StateDir: filepath.Join(cfg.StateDir, "netcfg"), NetworkDir: netDir, ListenIP: cfg.ListenIP,
			Confirm: time.Duration(cfg.NetworkConfirmS) * time.Second})
		if err != nil {
			return err
		}
		run(netcfg.Name, svc.Run)
	}
	if cfg.Runs(dhcp.Name) {
		pd, err := dhcp.PDFrom(cfg.PDPool, cfg.PDLen, cfg.PDSlice, cfg.PDReserve)
		if err != nil {
			return err
		}
		svc, err := dhcp.NewService(dhcp.ServiceDeps{NC: nc, KV: kv, NS: target, Log: log.With("service", dhcp.Name), PD: pd})
		if err != nil {
			return err
		}
		run(dhcp.Name, svc.Run)
	}
	if cfg.Runs(firewall.Name) {
		// Its table (blocks, allow-list, bans) is written before the API
		// opens: the wait for the services below covers it. sshd's
		// failures feed a second jail when routerd runs in the host's own
		// namespace and the host keeps an auth log.
		sshLog := ""
		if _, err := os.Stat("/var/log/auth.log"); err == nil && cfg.Netns == "" {
			sshLog = "/var/log/auth.log"
		}
		svc, err := firewall.New(firewall.Deps{NC: nc, KV: kv, NS: target, Log: log.With("service", firewall.Name),
			APIPort: cfg.ListenPort, SSHLog: sshLog, Bans: firewall.BanConfig{Off: cfg.BanMaxRetry < 0, MaxRetry: cfg.BanMaxRetry,
				FindTime: time.Duration(cfg.BanFindS) * time.Second, BanTime: time.Duration(cfg.BanS) * time.Second,
				MaxBanTime: time.Duration(cfg.BanMaxS) * time.Second}})
		if err != nil {
			return err
		}
		run(firewall.Name, svc.Run)
	}
	if cfg.Runs(shaper.Name) {
		svc, err := shaper.New(shaper.Deps{NC: nc, KV: kv, NS: target, Log: log.With("service", shaper.Name)})
		if err != nil {
			return err
		}
		run(shaper.Name, svc.Run)
	}
	if cfg.Runs(olt.Name) {
		svc := olt.New(olt.Deps{NC: nc, KV: kv, StateDir: cfg.StateDir, Log: log.With("service", olt.Name),
			PollEvery: time.Duration(cfg.OLTPollSeconds) * time.Second, BackupEvery: time.Duration(cfg.OLTBackupHours) * time.Hour,
			BackupKeep: cfg.OLTBackupKeep, StallTimeout: time.Duration(cfg.OLTStallSeconds) * time.Second,
			RxMinDBm: cfg.OLTRxMinDBm, RxMaxDBm: cfg.OLTRxMaxDBm})
		run(olt.Name, svc.Run)
	}
	if cfg.Runs(routing.Name) {
		// BIRD's files, control socket and the sealing key of peer
		// passwords live under <state_dir>/routing.
		svc, err := routing.New(routing.Deps{NC: nc, KV: kv, NS: target, Dir: filepath.Join(cfg.StateDir, "routing"),
			Confirm: time.Duration(cfg.BGPConfirmS) * time.Second, RTR: cfg.RPKIRTR, Log: log.With("service", routing.Name)})
		if err != nil {
			return err
		}
		run(routing.Name, svc.Run)
	}
	if cfg.Runs(cgnat.Name) {
		// NAT pools, CGNAT and port forwards; the CGNAT audit log (every
		// slot assignment and release) is <state_dir>/log/cgnat-audit.log.
		svc, err := cgnat.New(cgnat.Deps{NC: nc, KV: kv, NS: target, AuditLog: filepath.Join(cfg.StateDir, "log", "cgnat-audit.log"),
			Log: log.With("service", cgnat.Name)})
		if err != nil {
			return err
		}
		run(cgnat.Name, svc.Run)
	}
	if cfg.Runs(graph.Name) {
		// Its own handle on the target namespace: the SNMP agent listens
		// in it and interface counters are read from it.
		gns, err := netns.Open(cfg.Netns)
		if err != nil {
			return err
		}
		defer gns.Close()
		svc := graph.New(graph.Deps{NC: nc, KV: kv, NS: gns, StateDir: filepath.Join(cfg.StateDir, "graph"),
			SampleEvery: time.Duration(cfg.GraphSampleMS) * time.Millisecond, Log: log.With("service", graph.Name)})
		run(graph.Name, svc.Run)
	}
	if cfg.Runs(system.Name) {
		svc := system.New(system.Deps{NC: nc, KV: kv, StateDir: cfg.StateDir, Log: log.With("service", system.Name)})
		run(system.Name, svc.Run)
	}
	// Wait for the services this process started to register on the bus
	// (netcfg restores routes first; dhcp takes its host lock), so that
	// the first answers the API gives are whole. A service in standby
	// behind another host's lock never registers: after the bound the
	// API opens anyway and /status shows it stopped.
	wctx, cancel := context.WithTimeout(gctx, readyWait)
	if missing := bus.WaitUp(wctx, nc, started...); len(missing) > 0 && gctx.Err() == nil {
		log.Warn("services not registered yet; opening the API anyway", "services", missing, "waited", readyWait)
	}
	cancel()
	if opt.Provision != nil {
		pctx, cancel := context.WithTimeout(gctx, readyWait)
		err := opt.Provision(pctx, nc)
		cancel()
		if err != nil {
			return err
		}
	}

	if cfg.Runs("gateway") {
		if cfg.APIKey == "" {
			log.Warn("api_key is empty: the API refuses every request until one is configured")
		}
		authLog, err := gateway.NewAuthLog(cfg.AuthLog)
		if err != nil {
			return err
		}
		gw, err := gateway.New(gateway.Config{APIKey: cfg.APIKey, AuthLog: authLog, NC: nc, Log: log.With("service", "gateway")})
		if err != nil {
			return err
		}
		l := opt.Listener
		if l == nil {
			if l, err = net.Listen("tcp", cfg.Addr()); err != nil {
				return fmt.Errorf("gateway: %w", err)
			}
		}
		addr := l.Addr().String()
		run("gateway", func(ctx context.Context) error { return gw.Serve(ctx, l) })
		log.Info("API listening", "addr", addr)
		if opt.Ready != nil {
			opt.Ready(addr)
		}
	} else if opt.Ready != nil {
		opt.Ready("")
	}
	return g.Wait()
}

// readyWait bounds how long Run waits for its services before opening the
// API.
const readyWait = 20 * time.Second

func orInProcess(listen string) string {
	if listen == "" {
		return "in-process only"
	}
	return listen
}
