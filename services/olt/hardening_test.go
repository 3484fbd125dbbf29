package olt_test

import (
	"context"
	"net"
	"testing"
	"time"

	"routerd.dev/services/olt/sim"
)

// OLTs the driver was not built from: a sysname with characters beyond
// [A-Za-z0-9_.-], blanks before every prompt, a post-login banner with
// the words a refused login prints. Each used to hang every call until
// its timeout or to be taken for a refused login (401).
func TestUnusualOLTs(t *testing.T) {
	r := start(t)
	for _, c := range []struct {
		name string
		cfg  sim.OLTConfig
	}{
		{"sysname", sim.OLTConfig{Name: "POP@North:1"}},
		{"indented prompt", sim.OLTConfig{Name: "OLT-IND", PromptIndent: "   "}},
		{"banner", sim.OLTConfig{Name: "OLT-BAN", Banner: "  Unauthorized access is invalid and prosecuted.\n  Accounts are locked after 3 failures."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.User, c.cfg.Pass, c.cfg.NoPaging = simUser, simPass, true
			srv, err := sim.Start(context.Background(), sim.Config{OLTs: []sim.OLTConfig{c.cfg}})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			_, port, _ := net.SplitHostPort(srv.TelnetAddr())
			begin := time.Now()
			a := r.do(t, "POST", "/olt/info", map[string]any{"host": "127.0.0.1", "port": port, "user": simUser, "pass": simPass, "timeout": 10}, nil)
			envelope(t, a, "info", 200)
			if got := a.body["result"].(map[string]any)["sysname"]; got != c.cfg.Name {
				t.Errorf("sysname %v, want %s", got, c.cfg.Name)
			}
			if d := time.Since(begin); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			envelope(t, r.do(t, "POST", "/olt/onus", map[string]any{"host": "127.0.0.1", "port": port, "user": simUser, "pass": simPass, "timeout": 10}, nil), "onus", 200)
			// A wrong password is still a refused login.
			a = r.do(t, "POST", "/olt/info", map[string]any{"host": "127.0.0.1", "port": port, "user": simUser, "pass": "wrong", "timeout": 10}, nil)
			envelope(t, a, "info", 401)
		})
	}
}
