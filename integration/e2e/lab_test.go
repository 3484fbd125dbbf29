// Package e2e starts routerd --lab as a process and drives it over HTTP the
// way a billing system or the command-line tool would.
package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// routerd is one running lab process.
type routerd struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	key    string
	prefix string
	stderr *bytes.Buffer
}

func binary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ROUTERD_BIN"); p != "" {
		return p
	}
	p := filepath.Join(t.TempDir(), "routerd")
	out, err := exec.Command("go", "build", "-o", p, "routerd.dev/deploy/routerd").CombinedOutput()
	if err != nil {
		t.Fatalf("building routerd: %v\n%s", err, out)
	}
	return p
}

var bannerAPI = regexp.MustCompile(`API:\s+(http://\S+)`)
var bannerKey = regexp.MustCompile(`API key:\s+(\S+)`)

// startLab runs routerd --lab with its own namespace prefix and state dir,
// and waits until it prints its banner and answers GET /status.
func startLab(t *testing.T, bin, prefix, state string, extra ...string) *routerd {
	t.Helper()
	args := append([]string{"--lab", "--lab-prefix", prefix, "--state", state, "--listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &routerd{t: t, cmd: cmd, prefix: prefix, stderr: &bytes.Buffer{}}
	cmd.Stderr = r.stderr
	// The lab's namespaces are named (an operator enters them with ip netns
	// exec): whatever routerd leaves behind, for instance when it had to be
	// killed, goes when the test ends. This runs after r.stop.
	t.Cleanup(func() {
		for _, n := range labNamespaces(prefix) {
			_ = exec.Command("ip", "netns", "del", n).Run()
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(90 * time.Second)
	for r.url == "" || r.key == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("routerd exited before its banner:\n%s", r.stderr)
			}
			if m := bannerAPI.FindStringSubmatch(l); m != nil {
				r.url = m[1]
			}
			if m := bannerKey.FindStringSubmatch(l); m != nil {
				r.key = m[1]
			}
		case <-timeout:
			t.Fatalf("no banner after 90 s:\n%s", r.stderr)
		}
	}
	go func() {
		for range lines {
		}
	}()
	eventually(t, 30*time.Second, func() error {
		if st, m := r.call("GET", "/status", nil); st != 200 {
			return fmt.Errorf("GET /status answered %d %v:\n%s", st, m, r.stderr)
		}
		return nil
	})
	return r
}

// eventually calls cond until it returns nil, with a short backoff, and
// fails the test with its last error when within has passed. (The e2e
// module drives a binary and imports nothing of routerd's, so this is
// testenv.Eventually's twin rather than a use of it.)
func eventually(t *testing.T, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for gap := time.Millisecond; ; gap = min(2*gap, 100*time.Millisecond) {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not so after %v: %v", within, err)
		}
		time.Sleep(gap)
	}
}

// labNamespaces lists the namespaces of the lab with prefix that exist.
func labNamespaces(prefix string) []string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	var found []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], prefix+"-") {
			found = append(found, f[0])
		}
	}
	return found
}

func (r *routerd) stop() {
	if r.cmd.ProcessState != nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			r.t.Errorf("routerd did not exit cleanly on SIGTERM: %v\n%s", err, r.stderr)
		}
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
		r.t.Errorf("routerd ignored SIGTERM for 30 s")
	}
}

func (r *routerd) call(method, path string, body any) (int, map[string]any) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, r.url+path, rd)
	req.Header.Set("X-API-Key", r.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

func (r *routerd) must(method, path string, body any, want int) map[string]any {
	r.t.Helper()
	st, m := r.call(method, path, body)
	if st != want {
		r.t.Fatalf("%s %s %v: status %d, want %d: %v", method, path, body, st, want, m)
	}
	return m
}

func (r *routerd) inRouter(args ...string) string {
	r.t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", r.prefix + "-router"}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return string(out)
}

func uniquePrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "e2e" + hex.EncodeToString(b[:])
}

func TestLabEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	bin := binary(t)
	state := t.TempDir()
	prefix := uniquePrefix()
	r := startLab(t, bin, prefix, state)

	st := r.must("GET", "/status", nil, 200)
	if st["interfaces"].(float64) != 3 || st["antispoof"] != "off" || !strings.Contains(st["api"].(string), "v1.0") {
		t.Errorf("status: %v", st)
	}
	// routerd announces itself once its services registered, so the first
	// /status already shows dhcp running.
	if st["dhcp_service"] != "running" {
		t.Errorf("dhcp_service = %v, want running", st["dhcp_service"])
	}
	// The lab serves its subscriber port from the start: a real client in
	// the subscriber namespace gets a pool address from routerd.
	if _, err := exec.LookPath("udhcpc"); err == nil {
		out, err := exec.Command("ip", "netns", "exec", prefix+"-sub", "udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", "/bin/true").CombinedOutput()
		if err != nil || !regexp.MustCompile(`lease of 10\.77\.0\.\d+ obtained from 10\.77\.0\.1`).Match(out) {
			t.Errorf("udhcpc in the lab's subscriber namespace: %v\n%s", err, out)
		}
	} else {
		t.Log("udhcpc not installed: lab DHCP not checked")
	}

	// Plans: create, replace, validation, action form, delete.
	r.must("POST", "/plans", map[string]any{"name": "gold", "down_mbps": 500, "up_mbps": 100, "comment": "home"}, 201)
	if m := r.must("POST", "/plans", map[string]any{"name": "gold", "down_mbps": 600, "up_mbps": 100}, 200); m["message"] != "Plan updated" || m["olt"] != float64(1) { // the lab's OLT is brought in step
		t.Errorf("replace: %v", m)
	}
	if m := r.must("POST", "/plans", map[string]any{"name": "bad name", "down_mbps": 1, "up_mbps": 1}, 400); m["field"] != "name" {
		t.Errorf("bad name: %v", m)
	}
	if m := r.must("POST", "/plans", map[string]any{"name": "x", "down_mbps": 100001, "up_mbps": 1}, 400); m["field"] != "down_mbps" {
		t.Errorf("rate out of range: %v", m)
	}
	r.must("GET", "/api?action=plan-add&name=silver&down_mbps=100&up_mbps=20", nil, 201)
	if m := r.must("GET", "/plans", nil, 200); m["count"].(float64) != 2 {
		t.Errorf("plans: %v", m)
	}
	r.must("DELETE", "/plans", map[string]any{"name": "silver"}, 200)
	r.must("DELETE", "/plans/silver", nil, 404)

	// Routes: into the router namespace's kernel.
	r.must("POST", "/routes", map[string]any{"prefix": "10.50.0.0/16", "via": "198.18.0.1", "comment": "peering"}, 201)
	r.must("GET", "/api?action=route-add&prefix=2001:db8:50::/48&via=2001:db8:ffff::1", nil, 201)
	r.must("POST", "/routes", map[string]any{"prefix": "10.50.0.0/16", "via": "198.18.0.1"}, 409)
	if out := r.inRouter("ip", "route"); !strings.Contains(out, "10.50.0.0/16 via 198.18.0.1 dev up0 proto 213") {
		t.Errorf("route not in the router namespace:\n%s", out)
	}

	// Restart: the lab is rebuilt from scratch, so the kernel has lost the
	// routes; etcd has not, and netcfg puts them back.
	r.stop()
	if left := labNamespaces(prefix); len(left) > 0 {
		t.Errorf("lab namespaces left behind after exit: %v", left)
	}
	r = startLab(t, bin, prefix, state)
	if m := r.must("GET", "/plans", nil, 200); m["count"].(float64) != 1 {
		t.Errorf("plans after restart: %v", m)
	}
	eventually(t, 10*time.Second, func() error {
		if out := r.inRouter("ip", "route"); !strings.Contains(out, "10.50.0.0/16 via 198.18.0.1") {
			return fmt.Errorf("route not restored after restart:\n%s", out)
		}
		return nil
	})
	if out := r.inRouter("ip", "-6", "route"); !strings.Contains(out, "2001:db8:50::/48 via 2001:db8:ffff::1") {
		t.Errorf("v6 route not restored:\n%s", out)
	}
	m := r.must("DELETE", "/routes", map[string]any{"prefix": "10.50.0.0/16"}, 200)
	if m["kernel_removed"] != true {
		t.Errorf("delete: %v", m)
	}
	if out := r.inRouter("ip", "route"); strings.Contains(out, "10.50.0.0/16") {
		t.Errorf("deleted route still live:\n%s", out)
	}

	// Failed logins land in the auth log under the state directory.
	req, _ := http.NewRequest("GET", r.url+"/status?api_key=wrong", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	logText, _ := os.ReadFile(filepath.Join(state, "log", "auth.log"))
	if !strings.Contains(string(logText), "api_key=***") {
		t.Errorf("auth log: %q", logText)
	}
}

func TestLabNeedsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("checks the message a non-root user sees; needs root to switch user")
	}
	bin := binary(t)
	// A prefix of its own, in case it gets as far as making namespaces.
	prefix := uniquePrefix()
	t.Cleanup(func() {
		for _, n := range labNamespaces(prefix) {
			_ = exec.Command("ip", "netns", "del", n).Run()
		}
	})
	cmd := exec.Command(bin, "--lab", "--lab-prefix", prefix, "--state", t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("routerd --lab as nobody succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "needs root") {
		t.Errorf("message does not say it needs root:\n%s", out)
	}
}
