// Package lab builds the lab topology routerd --lab runs in: three network
// namespaces (the router, a subscriber side, an uplink) joined by veth
// pairs that act as the router's ports. It never touches the host's own
// namespace: every link it creates is moved into a lab namespace at once,
// and Teardown deletes the namespaces, which deletes their links with them.
package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
)

// Topology names the lab's namespaces and addresses.
type Topology struct {
	// Prefix starts every namespace name, so two labs can coexist.
	Prefix string
}

// Router, Subscriber and Uplink are the namespace names.
func (t Topology) Router() string     { return t.Prefix + "-router" }
func (t Topology) Subscriber() string { return t.Prefix + "-sub" }
func (t Topology) Uplink() string     { return t.Prefix + "-uplink" }

// RouterPath is the namespace path routerd's kernel services act in.
func (t Topology) RouterPath() string { return "/var/run/netns/" + t.Router() }

// Addresses of the lab. The subscriber port carries the gateway addresses
// of the subscriber network; the subscriber side gets its address by DHCP.
const (
	SubGateway4    = "10.77.0.1/24"
	SubGateway6    = "2001:db8:77::1/64"
	UplinkRouter4  = "198.18.0.2/30"
	UplinkPeer4    = "198.18.0.1/30"
	UplinkRouter6  = "2001:db8:ffff::2/64"
	UplinkPeer6    = "2001:db8:ffff::1/64"
	SubscriberPort = "sub0" // router side of the subscriber link
	UplinkPort     = "up0"  // router side of the uplink
)

// CheckRoot explains what the lab needs when it cannot have it.
func CheckRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("routerd --lab needs root: it creates network namespaces and veth links (run it as root, e.g. sudo make run)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("routerd --lab needs the ip command (Debian package iproute2)")
	}
	return nil
}

// Setup creates the namespaces and links. A leftover lab of the same
// prefix (from a run that was killed) is removed first.
func (t Topology) Setup() error {
	t.Teardown()
	steps := [][]string{
		{"netns", "add", t.Router()},
		{"netns", "add", t.Subscriber()},
		{"netns", "add", t.Uplink()},
		// Each pair is created inside the router namespace, its far end
		// moved to the other side: nothing appears in the host namespace.
		{"-n", t.Router(), "link", "add", SubscriberPort, "type", "veth", "peer", "name", "eth0", "netns", t.Subscriber()},
		{"-n", t.Router(), "link", "add", UplinkPort, "type", "veth", "peer", "name", "eth0", "netns", t.Uplink()},
		{"-n", t.Router(), "link", "set", "lo", "up"},
		{"-n", t.Router(), "link", "set", SubscriberPort, "up"},
		{"-n", t.Router(), "link", "set", UplinkPort, "up"},
		{"-n", t.Router(), "addr", "add", SubGateway4, "dev", SubscriberPort},
		{"-n", t.Router(), "-6", "addr", "add", SubGateway6, "dev", SubscriberPort, "nodad"},
		{"-n", t.Router(), "addr", "add", UplinkRouter4, "dev", UplinkPort},
		{"-n", t.Router(), "-6", "addr", "add", UplinkRouter6, "dev", UplinkPort, "nodad"},
		{"-n", t.Subscriber(), "link", "set", "lo", "up"},
		{"-n", t.Subscriber(), "link", "set", "eth0", "up"},
		{"-n", t.Uplink(), "link", "set", "lo", "up"},
		{"-n", t.Uplink(), "link", "set", "eth0", "up"},
		{"-n", t.Uplink(), "addr", "add", UplinkPeer4, "dev", "eth0"},
		{"-n", t.Uplink(), "-6", "addr", "add", UplinkPeer6, "dev", "eth0", "nodad"},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			t.Teardown()
			return fmt.Errorf("lab: ip %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	// The router forwards between its ports, as a router does; this is a
	// sysctl of the router namespace only.
	for _, k := range []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"} {
		if out, err := exec.Command("ip", "netns", "exec", t.Router(), "sysctl", "-qw", k).CombinedOutput(); err != nil {
			t.Teardown()
			return fmt.Errorf("lab: sysctl %s: %v: %s", k, err, out)
		}
	}
	return nil
}

// Teardown removes the lab's namespaces (and with them every lab link).
func (t Topology) Teardown() {
	for _, n := range []string{t.Router(), t.Subscriber(), t.Uplink()} {
		_ = exec.Command("ip", "netns", "del", n).Run()
	}
}

// PDPool and PDLen are the router configuration's delegation pool in the
// lab (pd_pool, pd_len) when its configuration sets none.
const (
	PDPool = "2001:db8:7700::/40"
	PDLen  = 56
)

// provisioned marks, in the state directory, a lab whose starting
// configuration has been made: a lab restarted on the same state keeps
// what the operator changed since, removals included.
const provisioned = "lab-provisioned"

// Provision makes the lab's starting DHCP configuration through the
// operations an operator would call, the first time the lab runs on a
// state directory: the subscriber port served on both families (DHCPv4
// from its /24, DHCPv6 addresses from its /64, prefixes delegated from
// 2001:db8:7700::/40 in /56s, 256 of them for the port) and the domain
// lab.example, so that a client in the subscriber namespace gets
// addresses at once, e.g.
//
//	ip netns exec rtrlab-sub udhcpc -i eth0 -n -q -f
func Provision(stateDir string) func(ctx context.Context, nc *nats.Conn) error {
	return func(ctx context.Context, nc *nats.Conn) error {
		mark := filepath.Join(stateDir, provisioned)
		if _, err := os.Stat(mark); err == nil {
			return nil
		}
		steps := []struct {
			what string
			do   func() error
		}{
			{"POST /net", func() error {
				_, err := bus.Invoke(ctx, nc, api.NetAdd, &api.NetIface{Iface: SubscriberPort, Label: "lab subscribers"})
				return err
			}},
			{"POST /net6", func() error {
				_, err := bus.Invoke(ctx, nc, api.Net6Add, &api.Net6Iface{Iface: SubscriberPort})
				return err
			}},
			{"POST /pd", func() error {
				_, err := bus.Invoke(ctx, nc, api.PDAdd, &api.PDSet{Iface: SubscriberPort, Size: 256})
				return err
			}},
			{"POST /dns", func() error {
				_, err := bus.Invoke(ctx, nc, api.DNSSetOp, &api.DNSSet{Domain: "lab.example"})
				return err
			}},
		}
		for _, s := range steps {
			if err := s.do(); err != nil {
				return fmt.Errorf("lab: %s for %s: %w", s.what, SubscriberPort, err)
			}
		}
		return os.WriteFile(mark, []byte("the lab's starting configuration was made; remove this file to make it again\n"), 0o600)
	}
}
