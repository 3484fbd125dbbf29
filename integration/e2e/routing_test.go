package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startLabConfig is startLab with a configuration file, ready once BIRD
// answers too.
func startLabConfig(t *testing.T, bin, prefix, state, config string) *routerd {
	t.Helper()
	r := startLab(t, bin, prefix, state, "--config", config)
	eventually(t, 30*time.Second, func() error {
		if st, m := r.call("GET", "/bgp", nil); st != 200 || m["bird_error"] != nil {
			return fmt.Errorf("GET /bgp answered %d %v", st, m)
		}
		return nil
	})
	return r
}

// birds counts the BIRD processes using the control socket sock.
func birds(sock string) int {
	n := 0
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(raw), sock) && strings.Contains(string(raw), "bird") {
			n++
		}
	}
	return n
}

// TestLabBGPChangeUndoneAfterKill9: a BGP change waiting for confirm when
// routerd is killed with SIGKILL is undone when routerd comes back (at
// start when the deadline passed, by the re-armed timer otherwise), in
// etcd and in the BIRD that runs; the killed routerd's BIRD does not
// survive it.
func TestLabBGPChangeUndoneAfterKill9(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	if _, err := exec.LookPath("bird"); err != nil {
		t.Skip("bird (package bird2) is not installed")
	}
	bin, prefix, state := binary(t), uniquePrefix(), t.TempDir()
	config := filepath.Join(state, "routerd.yaml")
	if err := os.WriteFile(config, []byte("bgp_confirm_s: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startLabConfig(t, bin, prefix, state, config)
	r.must("POST", "/bgp/set", map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
	r.must("POST", "/bgp/peer-add", map[string]any{"name": "upstream", "ip": "198.18.0.1", "asn": 65000}, 200)
	if a := r.must("POST", "/bgp/set", map[string]any{"enabled": true}, 200); a["pending"] != true {
		t.Fatalf("enable: %v", a)
	}
	r.must("POST", "/bgp/confirm", nil, 200)
	if a := r.must("POST", "/bgp/announce-add", map[string]any{"prefix": "185.10.0.0/22"}, 200); a["pending"] != true || a["deadline"] == nil {
		t.Fatalf("announce-add: %v", a)
	}
	r.must("POST", "/bgp/announce-add", map[string]any{"prefix": "185.11.0.0/22"}, 409)
	r.must("POST", "/bgp/nonsense", nil, 404)

	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	sock := filepath.Join(state, "routing", "bird.ctl")
	eventually(t, 5*time.Second, func() error {
		if n := birds(sock); n != 0 {
			return fmt.Errorf("%d bird processes outlived the killed routerd", n)
		}
		return nil
	})

	r = startLabConfig(t, bin, prefix, state, config)
	eventually(t, 15*time.Second, func() error {
		st, v := r.call("GET", "/bgp", nil)
		if st != 200 || len(v["announce"].([]any)) != 0 || v["pending"] != nil {
			return fmt.Errorf("GET /bgp: %d announce %v pending %v", st, v["announce"], v["pending"])
		}
		return nil
	})
	if file, err := os.ReadFile(filepath.Join(state, "routing", "bird.conf")); err != nil || strings.Contains(string(file), "185.10.0.0/22") {
		t.Fatalf("bird.conf still announces the undone prefix (%v)", err)
	}
	if n := birds(sock); n != 1 {
		t.Errorf("%d bird processes on %s, want 1", n, sock)
	}
}
