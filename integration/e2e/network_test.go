package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// networkLab starts the lab with the network apply's window set, and
// stores the network document (POST /network/adopt).
func networkLab(t *testing.T, bin, prefix, state string, confirmS int, adopt bool) *routerd {
	t.Helper()
	config := filepath.Join(state, "routerd.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("network_confirm_s: %d\n", confirmS)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startLab(t, bin, prefix, state, "--config", config)
	if adopt {
		r.must("POST", "/network/adopt", map[string]any{}, 201)
	}
	return r
}

var mtuRe = regexp.MustCompile(`mtu (\d+)`)

func (r *routerd) mtu(dev string) string {
	r.t.Helper()
	m := mtuRe.FindStringSubmatch(r.inRouter("ip", "link", "show", dev))
	if m == nil {
		r.t.Fatalf("no mtu for %s", dev)
	}
	return m[1]
}

func networkFile(state, name string) string {
	raw, _ := os.ReadFile(filepath.Join(state, "netcfg", "network", name))
	return string(raw)
}

// TestLabNetworkApplyRolledBackAfterKill9: an apply waiting for confirm
// when routerd is killed with SIGKILL is rolled back when routerd starts
// again (nobody confirmed), whether the deadline passed while it was down
// or not: the kernel, the rendered files and the stored document are as
// before and GET /network shows nothing pending. The apply saved an
// automatic configuration version.
func TestLabNetworkApplyRolledBackAfterKill9(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	bin := binary(t)
	for _, c := range []struct {
		name     string
		confirmS int
		down     time.Duration
	}{
		{"within the window", 120, 0},
		{"deadline passed while down", 6, 7 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefix, state := uniquePrefix(), t.TempDir()
			r := networkLab(t, bin, prefix, state, c.confirmS, true)
			before := r.must("GET", "/network", nil, 200)
			v1, _ := before["version"].(string)
			if before["managed"] != true || v1 == "" || before["pending"] != nil {
				t.Fatalf("GET /network after adopt: %v", before)
			}
			fileBefore := networkFile(state, "10-routerd-sub0.network")
			if !strings.Contains(fileBefore, "Name=sub0") || r.mtu("sub0") != "1500" {
				t.Fatalf("before: file %q mtu %s", fileBefore, r.mtu("sub0"))
			}

			a := r.must("POST", "/network/apply", map[string]any{"version": v1, "by": "noc",
				"ports": map[string]any{"sub0": map[string]any{"mtu": 1400}}}, 200)
			if a["deadline"] == nil || !regexp.MustCompile(`configuration version \d+ saved`).MatchString(a["text"].(string)) {
				t.Fatalf("apply: %v", a)
			}
			if r.mtu("sub0") != "1400" || !strings.Contains(networkFile(state, "10-routerd-sub0.network"), "MTUBytes=1400") {
				t.Fatalf("apply did not reach kernel and files: mtu %s", r.mtu("sub0"))
			}
			if v := r.must("GET", "/api?action=config-versions", nil, 200); !strings.Contains(fmt.Sprint(v), "network apply") {
				t.Errorf("no automatic version for the apply: %v", v)
			}
			if m := r.must("GET", "/network", nil, 200); m["pending"] == nil || m["version"] == v1 {
				t.Fatalf("pending: %v version %v", m["pending"], m["version"])
			}

			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
			time.Sleep(c.down)

			r = networkLab(t, bin, prefix, state, c.confirmS, false)
			after := r.must("GET", "/network", nil, 200)
			if after["pending"] != nil || after["version"] != v1 || after["managed"] != true {
				t.Fatalf("after the restart: pending %v version %v (want %s)", after["pending"], after["version"], v1)
			}
			if mtu := r.mtu("sub0"); mtu != "1500" {
				t.Errorf("kernel after the restart: sub0 mtu %s, want 1500", mtu)
			}
			if f := networkFile(state, "10-routerd-sub0.network"); f != fileBefore {
				t.Errorf("rendered file after the restart:\n%s\nwant\n%s", f, fileBefore)
			}
			if _, err := os.Stat(filepath.Join(state, "netcfg", "pending.json")); !os.IsNotExist(err) {
				t.Errorf("pending state left on disk: %v", err)
			}
			r.must("POST", "/network/confirm", nil, 400)
		})
	}
}

// TestLabNetworkLockOut: an SSH server (Debian's openssh-server) in the
// lab's router namespace with a client connected from the uplink
// namespace; an apply taking the uplink port down (and with it the
// session's address) is refused before anything changes, and the session
// survives. The same plan without the session is accepted.
func TestLabNetworkLockOut(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Skip("openssh-server is not installed")
	}
	bin, prefix, state := binary(t), uniquePrefix(), t.TempDir()
	r := networkLab(t, bin, prefix, state, 120, true)

	// sshd in the router namespace, key authentication only, everything
	// under the test's directory.
	dir := t.TempDir()
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "host"))
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "client"))
	pub, _ := os.ReadFile(filepath.Join(dir, "client.pub"))
	_ = os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600)
	conf := fmt.Sprintf("ListenAddress 198.18.0.2\nPort 22\nHostKey %s\nAuthorizedKeysFile %s\nPidFile %s\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\nStrictModes no\n",
		filepath.Join(dir, "host"), filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid"))
	_ = os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(conf), 0o600)
	_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	sshd := exec.Command("ip", "netns", "exec", prefix+"-router", "/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var sshdLog strings.Builder
	sshd.Stderr = &sshdLog
	if err := sshd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sshd.Process.Kill(); _ = sshd.Wait() })
	// The client, from the uplink side, keeps a session open.
	var client *exec.Cmd
	var clientOut strings.Builder
	eventually(t, 10*time.Second, func() error {
		if client != nil {
			_ = client.Process.Kill()
			_ = client.Wait()
		}
		clientOut.Reset()
		client = exec.Command("ip", "netns", "exec", prefix+"-uplink", "ssh", "-i", filepath.Join(dir, "client"),
			"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
			"root@198.18.0.2", "echo connected; sleep 60")
		client.Stdout, client.Stderr = &clientOut, &clientOut
		if err := client.Start(); err != nil {
			return err
		}
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if strings.Contains(clientOut.String(), "connected") {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("ssh session not up: %s / sshd: %s", clientOut.String(), sshdLog.String())
	})
	t.Cleanup(func() { _ = client.Process.Kill(); _ = client.Wait() })

	v := r.must("GET", "/network", nil, 200)["version"].(string)
	change := map[string]any{"version": v, "ports": map[string]any{"up0": map[string]any{"up": false}}}
	p := r.must("POST", "/network/plan", change, 200)
	refused := fmt.Sprint(p["refused"])
	if !strings.Contains(refused, "refused:") || !strings.Contains(refused, "SSH session from 198.18.0.1") {
		t.Fatalf("plan refused: %v", p["refused"])
	}
	a := r.must("POST", "/network/apply", change, 400)
	if !strings.Contains(fmt.Sprint(a["error"]), "refused:") {
		t.Errorf("apply: %v", a)
	}
	if out := r.inRouter("ip", "link", "show", "up0"); !strings.Contains(out, ",UP") {
		t.Errorf("up0 went down:\n%s", out)
	}
	if m := r.must("GET", "/network", nil, 200); m["pending"] != nil || m["version"] != v {
		t.Errorf("a refused apply changed the document: %v", m)
	}
	if client.ProcessState != nil {
		t.Fatalf("the SSH session ended: %s", clientOut.String())
	}
	// The session still carries traffic: a second command over the same
	// server answers.
	out, err := exec.Command("ip", "netns", "exec", prefix+"-uplink", "ssh", "-i", filepath.Join(dir, "client"),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
		"root@198.18.0.2", "echo still").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "still") {
		t.Errorf("ssh after the refusal: %v %s", err, out)
	}

	// Without the session, the same change is only a plan away.
	_ = client.Process.Kill()
	_ = client.Wait()
	eventually(t, 10*time.Second, func() error {
		p := r.must("POST", "/network/plan", change, 200)
		if l, _ := p["refused"].([]any); len(l) != 0 {
			return fmt.Errorf("still refused: %v", l)
		}
		return nil
	})
}

// TestFullKernelLabNetworkVLANForms (the VM tier): the monitor's
// immediate VLAN and address forms over HTTP on a full kernel: vlan-add
// on a lab port (200), vlan-check, vlan-disable refused while the caller
// came to the VLAN's address (409, refused), ip-add and ip-delete on the
// VLAN, then disable, enable and delete; the network files follow.
func TestFullKernelLabNetworkVLANForms(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	prefix, state := uniquePrefix(), t.TempDir()
	r := networkLab(t, binary(t), prefix, state, 120, true)
	st, m := r.call("POST", "/network/vlan-add", map[string]any{"parent": "up0", "vlan_id": 300, "ip": "10.30.0.1/24", "serve": false, "by": "noc"})
	if st == 500 && strings.Contains(fmt.Sprint(m["error"]), "802.1Q") {
		t.Skip("this kernel has no 802.1Q: the VM tier (make vm) runs this test")
	}
	if st != 200 || m["name"] != "vlan300" || m["ok"] != true {
		t.Fatalf("vlan-add: %d %v", st, m)
	}
	if f := networkFile(state, "10-routerd-vlan300.netdev"); !strings.Contains(f, "Id=300") || !strings.Contains(networkFile(state, "10-routerd-up0.network"), "VLAN=vlan300") {
		t.Errorf("VLAN files: %q", f)
	}
	c := r.must("POST", "/network/vlan-check", map[string]any{"name": "vlan300", "local": "10.30.0.1"}, 200)
	if !strings.Contains(fmt.Sprint(c["refused"]), "10.30.0.1") {
		t.Errorf("vlan-check: %v", c)
	}
	if m := r.must("POST", "/network/vlan-disable", map[string]any{"name": "vlan300", "local": "10.30.0.1"}, 409); m["refused"] == nil {
		t.Errorf("vlan-disable refused: %v", m)
	}
	r.must("POST", "/network/ip-add", map[string]any{"iface": "vlan300", "ip": "10.31.0.1/24"}, 200)
	r.must("POST", "/network/ip-delete", map[string]any{"iface": "vlan300", "ip": "10.31.0.1/24", "local": "10.31.0.1"}, 409)
	r.must("POST", "/network/ip-delete", map[string]any{"iface": "vlan300", "ip": "10.31.0.1/24"}, 200)
	r.must("POST", "/network/vlan-disable", map[string]any{"name": "vlan300", "reason": "maintenance"}, 200)
	if out := r.inRouter("ip", "link", "show", "vlan300"); strings.Contains(out, ",UP") {
		t.Errorf("vlan300 up after disable:\n%s", out)
	}
	r.must("POST", "/network/vlan-enable", map[string]any{"name": "vlan300"}, 200)
	r.must("POST", "/network/vlan-delete", map[string]any{"name": "vlan300"}, 200)
	r.must("POST", "/network/vlan-delete", map[string]any{"name": "vlan300"}, 404)
	if _, err := os.Stat(filepath.Join(state, "netcfg", "network", "10-routerd-vlan300.netdev")); !os.IsNotExist(err) {
		t.Errorf("the deleted VLAN's file is left: %v", err)
	}
}
