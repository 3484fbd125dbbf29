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
	"strings"
	"testing"
	"time"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

// topo is a router namespace and a subscriber namespace joined by a veth
// pair, made by the test and removed in Cleanup. Nothing touches the host's
// own network configuration: every address lives inside these namespaces.
type topo struct {
	srv, cli     string // namespace names
	srvIf, cliIf string
	dir          string
}

func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel test skipped: needs root to create network namespaces")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
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

func must(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := run(t, 30*time.Second, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	id := hex.EncodeToString(b)
	tp := &topo{srv: "dhcpt-" + id + "-r", cli: "dhcpt-" + id + "-c", srvIf: "dr" + id, cliIf: "dc" + id, dir: t.TempDir()}
	t.Cleanup(func() {
		// Kill anything still running in the subscriber namespace (daemonised
		// clients), then remove both namespaces and with them the veth pair.
		if out, err := exec.Command("ip", "netns", "pids", tp.cli).Output(); err == nil {
			for _, pid := range strings.Fields(string(out)) {
				exec.Command("kill", pid).Run()
			}
		}
		exec.Command("ip", "netns", "del", tp.cli).Run()
		exec.Command("ip", "netns", "del", tp.srv).Run()
	})
	must(t, "ip", "netns", "add", tp.srv)
	must(t, "ip", "netns", "add", tp.cli)
	for _, ns := range []string{tp.srv, tp.cli} {
		must(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
		must(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
		must(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	must(t, "ip", "-n", tp.srv, "link", "add", tp.srvIf, "type", "veth", "peer", "name", tp.cliIf, "netns", tp.cli)
	must(t, "ip", "-n", tp.srv, "addr", "add", "10.77.0.1/24", "dev", tp.srvIf)
	must(t, "ip", "-n", tp.srv, "-6", "addr", "add", "2001:db8:77::1/64", "dev", tp.srvIf, "nodad")
	must(t, "ip", "netns", "exec", tp.srv, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	must(t, "ip", "-n", tp.srv, "link", "set", tp.srvIf, "up")
	must(t, "ip", "-n", tp.cli, "link", "set", tp.cliIf, "up")
	// Wait (bounded) for both link-local addresses: DHCPv6 clients and RAs
	// need them.
	for _, side := range [][2]string{{tp.srv, tp.srvIf}, {tp.cli, tp.cliIf}} {
		for i := 0; i < 100; i++ {
			out, _ := run(t, 5*time.Second, "ip", "-n", side[0], "-6", "addr", "show", "dev", side[1], "scope", "link")
			if strings.Contains(out, "fe80::") && !strings.Contains(out, "tentative") {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return tp
}

// target opens the server side's namespace as the engine's target.
func (tp *topo) target(t *testing.T) *netns.NS {
	t.Helper()
	ns, err := netns.Open("/var/run/netns/" + tp.srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// setMAC gives the subscriber's interface a known MAC (for reservations).
func (tp *topo) setMAC(t *testing.T, mac string) {
	must(t, "ip", "-n", tp.cli, "link", "set", tp.cliIf, "address", mac)
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

// harness is a running engine over a real embedded etcd.
type harness struct {
	t      *testing.T
	etcd   *store.Embedded
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
	srv, err := store.StartEmbedded(context.Background(), store.EmbedConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	kv := srv.Client()
	t.Cleanup(func() { kv.Close() })
	h := &harness{t: t, etcd: srv, store: lease.NewEtcdStore(kv), cfg: cfg, tp: tp, events: &recorder{ch: make(chan string, 1000)}}
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
	// Wait (bounded) until the listeners are open.
	for i := 0; i < 100; i++ {
		eng.mu.Lock()
		n := len(eng.listeners)
		eng.mu.Unlock()
		if n >= len(h.cfg.Networks)+2*len(h.cfg.Networks6) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("engine listeners did not open")
}

func (h *harness) restart() {
	h.stop()
	h.start()
}

// waitLease polls (bounded) for a bound lease matching fn.
func (h *harness) waitLease(what string, fn func(lease.Lease) bool) lease.Lease {
	h.t.Helper()
	for i := 0; i < 100; i++ {
		for _, l := range h.eng.Leases() {
			if l.State == lease.Bound && fn(l) {
				return l
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("no bound lease: %s; have %+v", what, h.eng.Leases())
	return lease.Lease{}
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
