// Command routerd is the router's management plane. With no external
// addresses configured it runs everything in one process: an embedded NATS
// server, an embedded etcd, every service and the HTTP gateway. With
// --lab it first builds a throw-away topology of network namespaces and
// points the kernel services at it, so it is safe on a developer's machine.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"routerd.dev/deploy/lab"
	"routerd.dev/deploy/node"
	"routerd.dev/shared/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "routerd:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "licence" {
		return licenceCommand(os.Args[2:])
	}
	configPath := flag.String("config", "", "configuration file (YAML; see deploy/routerd.example.yaml)")
	labMode := flag.Bool("lab", false, "build a lab of network namespaces and run against it")
	labPrefix := flag.String("lab-prefix", "rtrlab", "name prefix of the lab's namespaces")
	listen := flag.String("listen", "", "API address host:port, overriding listen_ip/listen_port")
	stateDir := flag.String("state", "", "state directory, overriding state_dir")
	services := flag.String("services", "", "comma-separated services to run, overriding services")
	flag.Parse()

	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	// A key from the environment keeps it out of files (compose, systemd).
	if k := os.Getenv("ROUTERD_API_KEY"); k != "" {
		cfg.APIKey = k
	}
	if *stateDir != "" {
		cfg.StateDir = *stateDir
		cfg.AuthLog = filepath.Join(cfg.StateDir, "log", "auth.log")
	}
	if *services != "" {
		cfg.Services = strings.Split(*services, ",")
	}
	addr := cfg.Addr()
	if *listen != "" {
		addr = *listen
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level(cfg.LogLevel)}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *labMode {
		if err := lab.CheckRoot(); err != nil {
			return err
		}
		topo := lab.Topology{Prefix: *labPrefix}
		if err := topo.Setup(); err != nil {
			return err
		}
		defer topo.Teardown()
		cfg.Netns = topo.RouterPath()
		if cfg.PDPool == "" {
			cfg.PDPool, cfg.PDLen = lab.PDPool, lab.PDLen
		}
		if *listen == "" {
			addr = "127.0.0.1:8880"
		}
		if cfg.APIKey == "" {
			cfg.APIKey = newKey()
		}
		log.Info("lab namespaces ready", "router", topo.Router(), "subscriber", topo.Subscriber(), "uplink", topo.Uplink())
	}
	host, port, err := splitAddr(addr)
	if err != nil {
		return err
	}
	cfg.ListenIP, cfg.ListenPort = host, port
	if err := cfg.Validate(); err != nil && port != 0 {
		return err
	}
	var labOLT *lab.OLT
	if *labMode {
		// A simulated OLT, registered as "lab": the OLT operations and
		// provisioning work without hardware.
		if labOLT, err = lab.StartOLT(ctx); err != nil {
			return err
		}
		defer labOLT.Close()
	}
	opt := node.Options{Log: log, Ready: func(apiAddr string) {
		if *labMode && apiAddr != "" {
			printLabBanner(apiAddr, cfg.APIKey, lab.Topology{Prefix: *labPrefix})
			fmt.Print(labOLT.Banner(apiAddr, cfg.APIKey))
			if !(lab.Topology{Prefix: *labPrefix}).VLANs() {
				fmt.Println("  Note: this kernel has no 802.1Q/802.1ad VLAN links: VLAN operations will answer\n" +
					"        the kernel's refusal. `make run-vm` runs this lab in a VM with Debian's kernel.")
			}
		}
	}}
	if *labMode {
		opt.Seed = lab.SeedWith(labOLT, cfg.StateDir)
		opt.Provision = lab.Provision(cfg.StateDir)
	}
	return node.Run(ctx, cfg, opt)
}

func printLabBanner(addr, key string, t lab.Topology) {
	fmt.Printf(`
routerd lab is running.
  API:      http://%[1]s
  API key:  %[2]s
  Try:      curl -s -H 'X-API-Key: %[2]s' http://%[1]s/status
  Router namespace:     ip netns exec %[3]s ip addr
  Subscriber namespace: ip netns exec %[4]s bash
  DHCP from it:         ip netns exec %[4]s udhcpc -i eth0 -n -q -f -s /bin/true
  Uplink namespace:     ip netns exec %[5]s bash
Press Ctrl-C to stop; the lab's namespaces are removed on exit.
`, addr, key, t.Router(), t.Subscriber(), t.Uplink())
}

func newKey() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

func splitAddr(addr string) (string, int, error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("listen address %q: want host:port", addr)
	}
	var port int
	if _, err := fmt.Sscanf(addr[i+1:], "%d", &port); err != nil {
		return "", 0, fmt.Errorf("listen address %q: %w", addr, err)
	}
	return strings.Trim(addr[:i], "[]"), port, nil
}

func level(s string) slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(s))
	return l
}
