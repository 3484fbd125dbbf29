package olt_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"routerd.dev/services/olt/sim"
)

// The SSH host key of a registered OLT is recorded on first contact and
// checked afterwards: another key is refused, with a clear error, until
// the operator accepts it.
func TestSSHHostKeyRecordedAndChecked(t *testing.T) {
	r := start(t)
	_, port, _ := net.SplitHostPort(r.sim.SSHAddr())
	p, _ := strconv.Atoi(port)
	r.register(t, "lab", map[string]any{"protocol": "ssh", "port": p})
	envelope(t, r.do(t, "POST", "/olt/info", map[string]any{}, nil), "info", 200)
	a := r.do(t, "GET", "/olts", nil, nil)
	rec := a.body["olts"].([]any)[0].(map[string]any)
	key, _ := rec["ssh_host_key"].(string)
	if !strings.HasPrefix(key, "ssh-ed25519 ") || !strings.HasPrefix(rec["ssh_host_key_fingerprint"].(string), "SHA256:") {
		t.Fatalf("host key not recorded: %s", a.raw)
	}
	envelope(t, r.do(t, "POST", "/olt/info", map[string]any{}, nil), "info", 200)

	// Another device (a second simulator, with its own key) answers at
	// the registered address.
	other, err := sim.Start(context.Background(), sim.Config{OLTs: []sim.OLTConfig{{Name: "IMPOSTOR", User: simUser, Pass: simPass}}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, port2, _ := net.SplitHostPort(other.SSHAddr())
	p2, _ := strconv.Atoi(port2)
	want(t, r.do(t, "POST", "/olts/lab", map[string]any{"port": p2}, nil), 200)
	a = r.do(t, "POST", "/olt/info", map[string]any{}, nil)
	envelope(t, a, "info", 502)
	if !strings.Contains(a.body["error"].(string), "another SSH host key") || other.OLT(0).Commands() != 0 {
		t.Errorf("changed key: %s (commands %d)", a.raw, other.OLT(0).Commands())
	}
	// Accepted: the new key is recorded and used.
	want(t, r.do(t, "POST", "/olts/lab", map[string]any{"accept_host_key": true}, nil), 200)
	a = r.do(t, "POST", "/olt/info", map[string]any{}, nil)
	envelope(t, a, "info", 200)
	if a.body["result"].(map[string]any)["sysname"] != "IMPOSTOR" {
		t.Errorf("info after accepting: %s", a.raw)
	}
	a = r.do(t, "GET", "/olts", nil, nil)
	if k := a.body["olts"].([]any)[0].(map[string]any)["ssh_host_key"]; k == key || k == "" {
		t.Errorf("new key not recorded: %v", k)
	}
}

// An OLT whose firmware offers only older SSH algorithms is still reached,
// and its record says which it needed.
func TestSSHLegacyAlgorithms(t *testing.T) {
	r := start(t)
	old, err := sim.Start(context.Background(), sim.Config{OLTs: []sim.OLTConfig{{Name: "MA5683T", Model: sim.MA5683T, User: simUser, Pass: simPass, LegacySSH: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	_, port, _ := net.SplitHostPort(old.SSHAddr())
	p, _ := strconv.Atoi(port)
	r.register(t, "old", map[string]any{"protocol": "ssh", "port": p})
	a := r.do(t, "POST", "/olt/info", map[string]any{}, nil)
	envelope(t, a, "info", 200)
	a = r.do(t, "GET", "/olts", nil, nil)
	legacy := strs(a.body["olts"].([]any)[0].(map[string]any)["ssh_legacy_algorithms"])
	for _, w := range []string{"diffie-hellman-group1-sha1", "aes128-cbc"} {
		if !strings.Contains(strings.Join(legacy, " "), w) {
			t.Errorf("legacy %v lacks %s", legacy, w)
		}
	}
}
