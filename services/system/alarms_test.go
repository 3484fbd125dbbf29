package system_test

import (
	"fmt"
	"testing"
	"time"

	"routerd.dev/services/system"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestAlarmRegister: a service missing from the bus raises an alarm at the
// next sample; it clears when the service appears; an operator
// acknowledges it once (by@caller kept); GET /health has readings with
// every expected service's state. No action form.
func TestAlarmRegister(t *testing.T) {
	r := newRig(t, false, func(d *system.Deps) {
		d.Expect = []string{"subscribers", "system", "probe"}
		d.SampleEvery = 100 * time.Millisecond
	})
	var id float64
	testenv.Eventually(t, 10*time.Second, func() error {
		_, m := r.do("GET", "/alarms?state=active", nil)
		for _, a := range m["alarms"].([]any) {
			a := a.(map[string]any)
			if a["area"] == "probe" && a["severity"] == "critical" && a["raised_at"] != "" && a["cleared_at"] == "" {
				id = a["id"].(float64)
				return nil
			}
		}
		return fmt.Errorf("no active probe alarm: %v", m)
	})
	svc, err := bus.Serve(r.env.NC, bus.ServiceConfig{Name: "probe", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	testenv.Eventually(t, 10*time.Second, func() error {
		_, m := r.do("GET", "/alarms?state=cleared", nil)
		for _, a := range m["alarms"].([]any) {
			if a := a.(map[string]any); a["id"].(float64) == id && a["cleared_at"] != "" {
				return nil
			}
		}
		return fmt.Errorf("probe alarm %v not cleared: %v", id, m)
	})
	path := fmt.Sprintf("/alarms/%d/ack", int(id))
	st, m := r.do("POST", path, map[string]any{"by": "ops"})
	a := m["alarm"].(map[string]any)
	if st != 200 || a["acknowledged_by"] != "ops@127.0.0.1" || a["acknowledged_at"] == "" {
		t.Fatalf("ack: %d %v", st, m)
	}
	st, m = r.do("POST", path, map[string]any{"by": "other"})
	if st != 200 || m["alarm"].(map[string]any)["acknowledged_by"] != "ops@127.0.0.1" {
		t.Errorf("second ack: %d %v", st, m)
	}
	if st, m := r.do("POST", "/alarms/999/ack", nil); st != 404 {
		t.Errorf("unknown alarm: %d %v", st, m)
	}
	if st, m := r.do("POST", "/alarms/x/ack", nil); st != 400 || m["field"] != "id" {
		t.Errorf("bad id: %d %v", st, m)
	}
	if st, m := r.do("GET", "/alarms?state=bogus", nil); st != 400 || m["field"] != "state" {
		t.Errorf("bad state: %d %v", st, m)
	}
	if st, m := r.action("GET", "alarms", nil, nil); st != 400 || m["error"] != "Unknown action" {
		t.Errorf("alarms has no action form: %d %v", st, m)
	}

	_, m = r.do("GET", "/health?minutes=5", nil)
	rs := m["readings"].([]any)
	if len(rs) == 0 || m["every_seconds"] == nil {
		t.Fatalf("health: %v", m)
	}
	last := rs[len(rs)-1].(map[string]any)
	if last["services"].(map[string]any)["probe"] != "up" || last["services"].(map[string]any)["subscribers"] != "up" ||
		last["memory_percent"].(float64) <= 0 || last["time"] == "" {
		t.Errorf("reading %v", last)
	}
	if st, m := r.do("GET", "/health?minutes=0", nil); st != 400 || m["field"] != "minutes" {
		t.Errorf("minutes=0: %d %v", st, m)
	}
}
