package olt_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
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

// Descriptions longer than the OLT's column are printed wrapped; the
// blank at the wrap point (at the end of a piece, or at the start of the
// next) used to be lost, joining two words.
func TestWrappedDescriptionsKeepTheirBlanks(t *testing.T) {
	r := start(t)
	r.register(t, "lab", nil)
	envelope(t, r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 100}, nil), "vlan-add", 200)
	// The simulator wraps at 30 characters, as the device's column.
	descs := []string{
		"abcdefghijklmnopqrstuvwxyz0123456789",     // no blank near the wrap
		"flat 7 building A entrance 123 west wing", // blank at 30: starts the second piece
		"flat 8 building A entrance 12 east wing",  // blank at 29: ends the first piece
		"x",
	}
	for i, d := range descs {
		sn := "48575443BBBB00" + string(rune('A'+i)) + "1"
		r.sim.OLT(0).PlugONT(sim.AutofindONT{Port: "0/1/2", SN: sn})
		envelope(t, r.do(t, "POST", "/olt/ont-add", map[string]any{"port": "0/1/2", "sn": sn, "vlan": 100, "down_kbps": 10000, "up_kbps": 10000, "description": d}, nil), "ont-add", 200)
	}
	a := r.do(t, "POST", "/olt/onus", map[string]any{"port": "0/1/2"}, nil)
	envelope(t, a, "onus", 200)
	var got []string
	for _, o := range a.body["result"].(map[string]any)["onts"].([]any) {
		got = append(got, o.(map[string]any)["description"].(string))
	}
	for i, d := range descs {
		if i >= len(got) || got[i] != d {
			t.Errorf("description %d: got %q, want %q", i, got, d)
		}
	}
}

// Alarms the OLT prints as real OLTs print them (numbered header, broken
// alarm line, indented continuations, end marker), in the middle of an
// output, before a command's echo and while a command is typed, are taken
// out of the results and published for the monitor, one event each, with
// the alarm's name, port and ONT.
func TestAlarmsBecomeEvents(t *testing.T) {
	r := start(t)
	r.register(t, "lab", nil)
	sub, err := r.env.NC.SubscribeSync("router.events.olt.olt.alarm")
	if err != nil {
		t.Fatal(err)
	}
	olt := r.sim.OLT(0)
	for _, c := range []struct {
		moment string
		arm    func(name string)
		op     string
	}{
		{"mid-output", func(n string) { olt.InjectAlarm(n) }, "boards"},
		{"before the echo", func(n string) { olt.TypingAlarm(n, 0) }, "config"},
		{"while typing", func(n string) { olt.TypingAlarm(n, 8) }, "info"},
	} {
		name := "The ONT LOS " + c.moment
		c.arm(name)
		a := r.do(t, "POST", "/olt/"+c.op, map[string]any{}, nil)
		envelope(t, a, c.op, 200)
		if strings.Contains(a.raw, "ONT LOS") || strings.Contains(a.raw, "ALARM") || strings.Contains(a.raw, "END") {
			t.Errorf("%s: the alarm is left in the result: %s", c.moment, a.raw)
		}
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: no olt.alarm event", c.moment)
		}
		var env struct{ Data map[string]any }
		if err := json.Unmarshal(m.Data, &env); err != nil {
			t.Fatal(err)
		}
		ev := env.Data
		if ev["olt"] != "lab" || ev["name"] != name || ev["port"] != "0/1/0" || !strings.Contains(ev["alarm"].(string), "ALARM NAME : "+name) {
			t.Errorf("%s: event %s", c.moment, m.Data)
		}
	}
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("one event too many: %s", m.Data)
	}
}
