package dhcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// topo is a router namespace and a subscriber namespace joined by a veth
// pair, made by the test and gone with it. Both namespaces are anonymous
// (testenv.Netns): nothing is named under /var/run/netns, so nothing is
// left behind when a run is killed, and nothing touches the host's own
// network configuration. Commands run inside them through nsenter.
type topo struct {
	srv, cli     *netns.NS
	srvIf, cliIf string // unique: dhcpcd names its pid file after the interface
	dir          string
}

func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel test skipped: needs root to create network namespaces")
	}
	for _, tool := range append([]string{"ip", "nsenter"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("kernel test skipped: %s not installed", tool)
		}
	}
}

func run(t *testing.T, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// client runs a command in the subscriber namespace, bounded by timeout.
func (tp *topo) client(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	return run(t, timeout, "nsenter", append([]string{"--net=" + tp.cli.Path()}, args...)...)
}

// clientCmd is a command to start in the subscriber namespace.
func (tp *topo) clientCmd(args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + tp.cli.Path()}, args...)...)
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	id := hex.EncodeToString(b)
	tp := &topo{srv: testenv.Netns(t), cli: testenv.Netns(t), srvIf: "dr" + id, cliIf: "dc" + id, dir: t.TempDir()}
	// Runs before the namespaces are let go: kill anything still running in
	// the subscriber namespace (daemonised clients), which would keep it,
	// and the veth pair with it, alive.
	t.Cleanup(func() { killIn(tp.cli) })
	for _, ns := range []*netns.NS{tp.srv, tp.cli} {
		testenv.Run(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
		testenv.Run(t, ns, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
		testenv.Run(t, ns, "ip", "link", "set", "lo", "up")
	}
	nl, err := tp.srv.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: tp.srvIf}, PeerName: tp.cliIf}); err != nil {
		t.Skipf("kernel test skipped: veth not available: %v", err)
	}
	peer, err := nl.LinkByName(tp.cliIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.LinkSetNsFd(peer, tp.cli.FD()); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, tp.srv, "ip", "addr", "add", "10.77.0.1/24", "dev", tp.srvIf)
	testenv.Run(t, tp.srv, "ip", "-6", "addr", "add", "2001:db8:77::1/64", "dev", tp.srvIf, "nodad")
	testenv.Run(t, tp.srv, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	testenv.Run(t, tp.srv, "ip", "link", "set", tp.srvIf, "up")
	testenv.Run(t, tp.cli, "ip", "link", "set", tp.cliIf, "up")
	// Both link-local addresses must be usable: DHCPv6 clients and RAs
	// need them.
	for _, side := range []struct {
		ns  *netns.NS
		dev string
	}{{tp.srv, tp.srvIf}, {tp.cli, tp.cliIf}} {
		testenv.Eventually(t, 5*time.Second, func() error {
			out := testenv.Run(t, side.ns, "ip", "-6", "addr", "show", "dev", side.dev, "scope", "link")
			if !strings.Contains(out, "fe80::") || strings.Contains(out, "tentative") {
				return fmt.Errorf("no usable link-local address on %s:\n%s", side.dev, out)
			}
			return nil
		})
	}
	return tp
}

// killIn kills every process whose network namespace is ns.
func killIn(ns *netns.NS) {
	var want unix.Stat_t
	if err := unix.Fstat(ns.FD(), &want); err != nil {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil || st.Dev != want.Dev || st.Ino != want.Ino {
			continue
		}
		if pid, err := strconv.Atoi(strings.Split(p, "/")[2]); err == nil && pid != os.Getpid() {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// target opens the server side's namespace as the engine's target.
func (tp *topo) target(t *testing.T) *netns.NS {
	t.Helper()
	ns, err := netns.Open(tp.srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// setMAC gives the subscriber's interface a known MAC (for reservations).
func (tp *topo) setMAC(t *testing.T, mac string) {
	testenv.Run(t, tp.cli, "ip", "link", "set", tp.cliIf, "address", mac)
}

// script writes a client hook that records what the client was told and
// applies an IPv4 address inside the subscriber namespace only.
func (tp *topo) script(t *testing.T) (path, log string) {
	path, log = filepath.Join(tp.dir, "hook.sh"), filepath.Join(tp.dir, "hook.log")
	body := `#!/bin/sh
# dhclient: $reason/$new_ip_address; udhcpc: $1/$ip; dhcpcd: $reason/$new_ip_address
echo "${reason:-$1} ${new_ip_address:-$ip} ${new_ip6_address} ${new_ip6_prefix} ${new_host_name:-$hostname} ${new_domain_name:-$domain}" >> ` + log + `
ifc=${interface}
addr=${new_ip_address:-$ip}
case "${reason:-$1}" in
BOUND|RENEW|REBIND|REBOOT|bound|renew) [ -n "$addr" ] && ip addr replace "$addr/24" dev "$ifc" ;;
RELEASE|EXPIRE|deconfig) ip -4 addr flush dev "$ifc" ;;
esac
exit 0
`
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, log
}

// harness is a running engine over a real embedded etcd (the package's,
// in a keyspace of the test's own).
type harness struct {
	t      *testing.T
	store  *lease.EtcdStore
	cfg    config.Config
	tp     *topo
	eng    *Engine
	events *recorder
	stop   func()
}

type recorder struct {
	ch chan string
}

func (r *recorder) Publish(kind string, payload any) {
	l, _ := payload.(lease.Lease)
	select {
	case r.ch <- kind + " " + l.Addr.String():
	default:
	}
}

func newHarness(t *testing.T, tp *topo, cfg config.Config) *harness {
	t.Helper()
	h := &harness{t: t, store: lease.NewEtcdStore(testenv.Etcd(t)), cfg: cfg, tp: tp, events: &recorder{ch: make(chan string, 1000)}}
	h.start()
	t.Cleanup(func() { h.stop() })
	return h
}

func (h *harness) start() {
	h.t.Helper()
	eng, err := New(h.cfg, Deps{Store: h.store, NetNS: h.tp.target(h.t), Events: h.events, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), ListenRetry: 200 * time.Millisecond})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	h.eng = eng
	h.stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				h.t.Errorf("engine Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			h.t.Errorf("engine did not stop")
		}
		h.stop = func() {}
	}
	want := len(h.cfg.Networks) + 2*len(h.cfg.Networks6)
	testenv.Eventually(h.t, 5*time.Second, func() error {
		if n := eng.listenerCount(); n < want {
			return fmt.Errorf("%d engine listeners open, want %d", n, want)
		}
		return nil
	})
}

// listenerCount is how many listeners the engine has open.
func (e *Engine) listenerCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.listeners)
}

func (h *harness) restart() {
	h.stop()
	h.start()
}

// waitLease polls (bounded) for a bound lease matching fn.
func (h *harness) waitLease(what string, fn func(lease.Lease) bool) lease.Lease {
	h.t.Helper()
	var found lease.Lease
	testenv.Eventually(h.t, 5*time.Second, func() error {
		for _, l := range h.eng.Leases() {
			if l.State == lease.Bound && fn(l) {
				found = l
				return nil
			}
		}
		return fmt.Errorf("no bound lease: %s; have %+v", what, h.eng.Leases())
	})
	return found
}

// stored reads the leases durable in etcd.
func (h *harness) stored() map[string]lease.Lease {
	h.t.Helper()
	ls, err := h.store.Load(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]lease.Lease{}
	for _, l := range ls {
		out[l.Key()] = l
	}
	return out
}

func fmtLeases(ls []lease.Lease) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%s %s %s %s\n", l.Key(), l.State, l.MAC, l.Hostname)
	}
	return b.String()
}
