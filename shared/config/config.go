// Package config is routerd's configuration file: typed, each key with a
// comment and an example, defaults in one place (Default), validated at load.
// The file is YAML; keys are the spec's names (listen_ip, api_key, pd_pool...).
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Services is every service routerd can run, in start order.
var Services = []string{"subscribers", "netcfg", "dhcp", "firewall", "shaper", "cgnat", "olt", "routing", "graph", "system", "gateway"}

// Config is the whole configuration file.
type Config struct {
	// ListenIP is the address the API listens on. Example: 192.0.2.1.
	ListenIP string `json:"listen_ip"`
	// ListenPort is the API port. Example: 8880.
	ListenPort int `json:"listen_port"`
	// APIKey is the key every request must carry. Empty refuses every
	// request. Example: 3f9c0d...; generate with `openssl rand -hex 24`.
	APIKey string `json:"api_key"`
	// StateDir holds the embedded etcd and NATS data, logs and backups.
	// Example: /var/lib/routerd.
	StateDir string `json:"state_dir"`
	// AuthLog is where failed authentications are written, one line each,
	// for the ban service. Default: <state_dir>/log/auth.log.
	AuthLog string `json:"auth_log"`
	// NATSURL is an external NATS cluster; empty starts an embedded server.
	// Example: nats://10.0.0.5:4222,nats://10.0.0.6:4222.
	NATSURL string `json:"nats_url"`
	// NATSListen makes the embedded NATS server listen for other processes
	// of a split deployment. Empty: in-process only. Example: 127.0.0.1:4222.
	NATSListen string `json:"nats_listen"`
	// EtcdEndpoints is an external etcd cluster; empty starts an embedded one.
	// Example: [http://10.0.0.5:2379].
	EtcdEndpoints []string `json:"etcd_endpoints"`
	// EtcdListen is the client address of the embedded etcd. Empty picks a
	// free loopback port. Example: 127.0.0.1:2379.
	EtcdListen string `json:"etcd_listen"`
	// Services lists the services this process runs; empty means all of
	// them. Example: [gateway] or [netcfg, dhcp].
	Services []string `json:"services"`
	// Netns is the network namespace kernel-touching services act in; empty
	// means the one routerd runs in. Example: /var/run/netns/router.
	Netns string `json:"netns"`
	// PDPool is the router-wide IPv6 prefix delegation pool. Example: 2001:db8:100::/40.
	PDPool string `json:"pd_pool"`
	// PDLen is the length of each delegated prefix. Default 64. Example: 56.
	PDLen int `json:"pd_len"`
	// PDSlice is how many prefixes each VLAN gets by default. Default 256.
	PDSlice int `json:"pd_slice"`
	// PDReserve is how many prefixes at the start of the pool are kept for
	// prefixes pinned to single clients. Default 256.
	PDReserve int `json:"pd_reserve"`
	// OLTPollSeconds is how often the olt service reads each registered
	// OLT for the monitor's events (ONT found, online/offline, optical
	// level, OLT unreachable). 0 means 60; -1 switches the poller off.
	// Example: 30.
	OLTPollSeconds int `json:"olt_poll_seconds"`
	// OLTBackupHours is the period of the automatic configuration backup
	// of every registered OLT. 0 means 24; -1 switches it off. Example: 12.
	OLTBackupHours int `json:"olt_backup_hours"`
	// OLTBackupKeep is how many configuration revisions each OLT keeps.
	// 0 means 30. Example: 90.
	OLTBackupKeep int `json:"olt_backup_keep"`
	// OLTStallSeconds gives an OLT session up when the OLT sends nothing
	// for this long while an answer is awaited, instead of waiting for the
	// operation's whole timeout (save excepted). 0 means 20. Example: 30.
	OLTStallSeconds int `json:"olt_stall_seconds"`
	// OLTRxMinDBm and OLTRxMaxDBm are the received optical power outside
	// which the olt poller reports an ONT (ont.optical). 0 means -27 and
	// -8 (class B+). Example: -29 and -8 for class C+ optics.
	OLTRxMinDBm float64 `json:"olt_rx_min_dbm"`
	OLTRxMaxDBm float64 `json:"olt_rx_max_dbm"`
	// BGPConfirmS is how long a BGP/OSPF change waits for POST /bgp/confirm
	// before it is undone, in seconds; 0 is 120 (the spec's). Tests
	// shorten it. Example: 120.
	BGPConfirmS int `json:"bgp_confirm_s"`
	// GraphSampleMS is how often the graph service samples the traffic
	// counters its graphs are drawn from, in milliseconds; 0 is 60000 (the
	// spec's minute). Only tests shorten it: the graphs' periods are rows
	// of this step. Example: 60000.
	GraphSampleMS int `json:"graph_sample_ms"`
	// NetworkDir is where netcfg renders the systemd-networkd files of the
	// network document. Empty: /etc/systemd/network when netcfg works in
	// routerd's own namespace, <state_dir>/netcfg/network when it works
	// in another (netns, the lab). Example: /etc/systemd/network.
	NetworkDir string `json:"network_dir"`
	// NetworkConfirmS is how long a network apply waits for POST
	// /network/confirm before it is rolled back, in seconds; 0 is 120 (the
	// spec's). Only tests shorten it. Example: 120.
	NetworkConfirmS int `json:"network_confirm_s"`
	// RPKIRTR is the RPKI cache (RTR protocol, e.g. stayrtr) BIRD asks
	// while rpki is on; "" is 127.0.0.1:8282. Example: 127.0.0.1:8282.
	RPKIRTR string `json:"rpki_rtr"`
	// BanMaxRetry failed authentications of one address within BanFindS
	// seconds ban it from the API and OLT monitor ports for BanS seconds,
	// doubled for each earlier ban of the address up to BanMaxS (the
	// firewall service's ban engine). 0 takes fail2ban's defaults (5, 600,
	// 3600, 604800); ban_max_retry -1 switches the ban service off.
	// Example: 5.
	BanMaxRetry int `json:"ban_max_retry"`
	BanFindS    int `json:"ban_find_s"`
	BanS        int `json:"ban_s"`
	BanMaxS     int `json:"ban_max_s"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `json:"log_level"`
}

// Default returns the configuration used for every key the file omits.
func Default() Config {
	return Config{
		ListenIP:   "0.0.0.0",
		ListenPort: 8880,
		StateDir:   "/var/lib/routerd",
		PDLen:      64,
		PDSlice:    256,
		PDReserve:  256,
		LogLevel:   "info",
	}
}

// Load reads path over the defaults and validates the result. A missing
// path is an error; an empty path gives the defaults.
func Load(path string) (Config, error) {
	c := Default()
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		if err := yaml.UnmarshalStrict(raw, &c); err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
	}
	c.fill()
	return c, c.Validate()
}

func (c *Config) fill() {
	if c.AuthLog == "" {
		c.AuthLog = filepath.Join(c.StateDir, "log", "auth.log")
	}
}

// Validate checks every key and reports all problems at once.
func (c *Config) Validate() error {
	var errs []error
	if net.ParseIP(c.ListenIP) == nil {
		errs = append(errs, fmt.Errorf("listen_ip %q is not an IP address", c.ListenIP))
	}
	if c.ListenPort < 1 || c.ListenPort > 65535 {
		errs = append(errs, fmt.Errorf("listen_port %d is not 1-65535", c.ListenPort))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("state_dir is required"))
	}
	for _, s := range c.Services {
		if !slices.Contains(Services, s) {
			errs = append(errs, fmt.Errorf("services: unknown service %q (known: %s)", s, strings.Join(Services, ", ")))
		}
	}
	if c.PDPool != "" {
		p, err := netip.ParsePrefix(c.PDPool)
		if err != nil || !p.Addr().Is6() {
			errs = append(errs, fmt.Errorf("pd_pool %q is not an IPv6 prefix", c.PDPool))
		} else if c.PDLen <= p.Bits() {
			errs = append(errs, fmt.Errorf("pd_len %d must be longer than pd_pool's /%d", c.PDLen, p.Bits()))
		}
	}
	if c.PDLen < 48 || c.PDLen > 64 {
		errs = append(errs, fmt.Errorf("pd_len %d is not 48-64", c.PDLen))
	}
	if c.PDSlice < 1 || c.PDSlice&(c.PDSlice-1) != 0 {
		errs = append(errs, fmt.Errorf("pd_slice %d is not a power of two", c.PDSlice))
	}
	if c.PDReserve < 0 {
		errs = append(errs, fmt.Errorf("pd_reserve %d is negative", c.PDReserve))
	}
	if c.OLTStallSeconds < 0 || c.OLTRxMinDBm < -50 || c.OLTRxMaxDBm > 10 || (c.OLTRxMinDBm != 0 && c.OLTRxMaxDBm != 0 && c.OLTRxMinDBm >= c.OLTRxMaxDBm) {
		errs = append(errs, errors.New("olt_stall_seconds must be 0 (default) or positive; olt_rx_min_dbm (from -50) must be below olt_rx_max_dbm (up to 10)"))
	}
	if c.GraphSampleMS < 0 {
		errs = append(errs, fmt.Errorf("graph_sample_ms %d is negative", c.GraphSampleMS))
	}
	if c.OLTPollSeconds < -1 || c.OLTBackupHours < -1 || c.OLTBackupKeep < 0 {
		errs = append(errs, errors.New("olt_poll_seconds and olt_backup_hours must be -1 (off), 0 (default) or positive; olt_backup_keep 0 or positive"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level %q is not debug, info, warn or error", c.LogLevel))
	}
	return errors.Join(errs...)
}

// Runs reports whether this process runs service.
func (c *Config) Runs(service string) bool {
	return len(c.Services) == 0 || slices.Contains(c.Services, service)
}

// Addr is the API listen address.
func (c *Config) Addr() string {
	return net.JoinHostPort(c.ListenIP, fmt.Sprint(c.ListenPort))
}
