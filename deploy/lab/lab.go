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
	"net/netip"
	"os"
	"os/exec"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/services/dhcp"
	dhcpconfig "routerd.dev/services/dhcp/config"
	"routerd.dev/shared/store"
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

// DHCP is the DHCP configuration the lab starts with: the subscriber port
// served on both families (pool 10.77.0.100-199, DHCPv6 addresses from
// the /64 and /56 prefixes delegated from 2001:db8:7700::/40), so that a
// client in the subscriber namespace gets addresses at once, e.g.
//
//	ip netns exec rtrlab-sub udhcpc -i eth0 -n -q -f
func DHCP() dhcpconfig.Config {
	return dhcpconfig.Config{
		Networks: []dhcpconfig.Network{{
			Iface: SubscriberPort, Gateway: addr(SubGateway4), Prefix: netip.MustParsePrefix(SubGateway4).Masked(),
			PoolStart: netip.MustParseAddr("10.77.0.100"), PoolEnd: netip.MustParseAddr("10.77.0.199"),
			Label: "lab subscribers",
		}},
		Networks6: []dhcpconfig.Network6{{
			Iface: SubscriberPort, Gateway: addr(SubGateway6), Prefix: netip.MustParsePrefix(SubGateway6).Masked(),
		}},
		PD: dhcpconfig.PD{
			Pool: netip.MustParsePrefix("2001:db8:7700::/40"), Len: 56,
			Slices: map[string]dhcpconfig.Slice{SubscriberPort: {Index: 0, Size: 256}},
		},
		DNS: dhcpconfig.DNS{Domain: "lab.example"},
	}
}

func addr(prefix string) netip.Addr { return netip.MustParsePrefix(prefix).Addr() }

// Seed stores the lab's starting configuration where none is stored yet,
// so a lab restarted with the same state directory keeps what the
// operator changed.
func Seed(ctx context.Context, kv *clientv3.Client) error {
	st := store.New(kv, dhcp.Name)
	key := st.Key(dhcp.ConfigDoc)
	if _, err := st.Txn().IfAbsent(key).Put(key, DHCP()).Commit(ctx); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("lab: storing the dhcp configuration: %w", err)
	}
	return nil
}
