package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The firewall service inside routerd --lab: its table in the lab's router
// namespace, the allow-list over HTTP, wrong keys from loopback never
// banned (through the gateway's report to the ban engine), and
// anti-spoofing on the lab's subscriber port with the real dhcp service:
// in strict mode an unregistered device still gets its lease but nothing
// else; in dynamic mode the address DHCP leased it passes.
func TestLabFirewall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	prefix := uniquePrefix()
	r := startLab(t, binary(t), prefix, t.TempDir())

	m := r.must("GET", "/protect", nil, 200)
	if m["status"] != "open (no restrictions)" || m["count"].(float64) != 0 {
		t.Errorf("GET /protect: %v", m)
	}
	r.must("POST", "/protect", map[string]any{"network": "192.0.2.7", "comment": "noc"}, 201)
	r.must("GET", "/protect/add?network=192.0.2.7", nil, 409)
	if m := r.must("GET", "/api?action=protect-list", nil, 200); m["status"] != "protected" || m["count"].(float64) != 1 {
		t.Errorf("protect-list: %v", m)
	}
	out := r.inRouter("nft", "list", "table", "inet", "routerd_firewall")
	if !strings.Contains(out, `192.0.2.7 comment "noc"`) || !strings.Contains(out, "set guarded") {
		t.Errorf("table in the router namespace:\n%s", out)
	}
	r.must("GET", "/protect/delete?network=192.0.2.7", nil, 200)
	r.must("DELETE", "/protect", map[string]any{"network": "192.0.2.7"}, 404)

	// Wrong keys from loopback: reported, never banned.
	for i := 0; i < 8; i++ {
		req, _ := http.NewRequest("GET", r.url+"/status", nil)
		req.Header.Set("X-API-Key", "wrong")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	time.Sleep(200 * time.Millisecond)
	f := r.must("GET", "/fail2ban", nil, 200)
	jails := f["jails"].([]any)
	if f["running"] != true || len(jails) != 1 || len(jails[0].(map[string]any)["banned_ips"].([]any)) != 0 {
		t.Errorf("GET /fail2ban: %v", f)
	}
	r.must("POST", "/fail2ban", map[string]any{"unban": "not-an-ip"}, 400)
	if full := r.must("GET", "/firewall/full", nil, 200); !strings.Contains(fmt.Sprint(full["forward_chain"]), "@block4") {
		t.Errorf("GET /firewall/full: %v", full)
	}

	// Anti-spoofing on the subscriber port.
	if _, err := exec.LookPath("udhcpc"); err != nil {
		t.Skip("udhcpc not installed")
	}
	if m := r.must("POST", "/antispoof", map[string]any{"enabled": true, "mode": "strict", "log": true}, 200); m["message"] != "enabled" {
		t.Fatalf("enable: %v", m)
	}
	eventually(t, 10*time.Second, func() error {
		st := r.must("GET", "/antispoof", nil, 200)
		if e, ok := st["enforced"].(map[string]any)["sub0"].(map[string]any); !ok || e["exists"] != true {
			return fmt.Errorf("sub0 not enforced: %v", st)
		}
		return nil
	})
	sub := func(args ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", prefix + "-sub"}, args...)...).CombinedOutput()
		return string(out), err
	}
	dhcp, err := sub("udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", "/bin/true")
	lease := regexp.MustCompile(`lease of (10\.77\.0\.\d+) obtained`).FindStringSubmatch(dhcp)
	if err != nil || lease == nil {
		t.Fatalf("strict mode: an unregistered device gets no lease: %v\n%s", err, dhcp)
	}
	if _, err := sub("ip", "addr", "replace", lease[1]+"/24", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	if out, err := sub("ping", "-c", "1", "-W", "1", "10.77.0.1"); err == nil {
		t.Errorf("strict mode: an unregistered device reached the router:\n%s", out)
	}
	if m := r.must("POST", "/antispoof/sub0", map[string]any{"mode": "dynamic"}, 200); m["effective"] != "dynamic" {
		t.Errorf("dynamic: %v", m)
	}
	eventually(t, 10*time.Second, func() error {
		if out, err := sub("ping", "-c", "1", "-W", "1", "10.77.0.1"); err != nil {
			return fmt.Errorf("dynamic mode: the leased device cannot reach the router: %v\n%s", err, out)
		}
		return nil
	})
	// Another address than its lease is dropped and logged.
	sub("ip", "addr", "add", "10.77.0.250/24", "dev", "eth0")
	if out, err := sub("ping", "-c", "1", "-W", "1", "-I", "10.77.0.250", "10.77.0.1"); err == nil {
		t.Errorf("a forged source passed:\n%s", out)
	}
	eventually(t, 10*time.Second, func() error {
		lg := r.must("GET", "/antispoof/log?since=10m", nil, 200)
		if !strings.Contains(fmt.Sprint(lg["entries"]), "10.77.0.250") {
			return fmt.Errorf("not logged: %v", lg)
		}
		return nil
	})
	if m := r.must("POST", "/antispoof", map[string]any{"enabled": false}, 200); m["message"] != "disabled - rules removed" {
		t.Errorf("disable: %v", m)
	}
}
