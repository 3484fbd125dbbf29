package system_test

import (
	"context"
	"strings"
	"testing"

	"routerd.dev/proto/event"
	"routerd.dev/services/system"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

func findings(t *testing.T, m map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, f := range m["findings"].([]any) {
		out = append(out, f.(map[string]any))
	}
	return out
}

func has(fs []map[string]any, severity, area, problem string) bool {
	for _, f := range fs {
		if f["severity"] == severity && f["area"] == area && strings.Contains(f["problem"].(string), problem) {
			return true
		}
	}
	return false
}

// TestDoctor: services missing from the bus and DHCP not running are
// critical findings (ok false, still 200); a damaged stored document is
// one naming its key; with everything expected running and a version
// saved, nothing is critical. Both forms answer.
func TestDoctor(t *testing.T) {
	r := newRig(t, false, func(d *system.Deps) { d.Expect = []string{"subscribers", "netcfg", "dhcp", "system"} })
	st, m := r.do("GET", "/doctor", nil)
	if st != 200 || m["ok"] != false || m["code"].(float64) != 200 {
		t.Fatalf("doctor: %d %v", st, m)
	}
	fs := findings(t, m)
	for _, want := range [][3]string{{"critical", "netcfg", "not on the bus"}, {"critical", "dhcp", "not on the bus"},
		{"critical", "dhcp", "DHCP is not running"}, {"info", "configuration", "no configuration version is saved"}} {
		if !has(fs, want[0], want[1], want[2]) {
			t.Errorf("no %v in %v", want, fs)
		}
	}
	c := m["counts"].(map[string]any)
	if int(c["critical"].(float64)+c["warning"].(float64)+c["info"].(float64)) != len(fs) || int(m["count"].(float64)) != len(fs) || c["critical"].(float64) < 3 {
		t.Errorf("counts %v of %d findings", c, len(fs))
	}
	for _, f := range fs {
		if f["problem"] == "" || f["fix"] == "" {
			t.Errorf("finding without problem or fix: %v", f)
		}
	}
	a := r.expect(200, "GET", "doctor", nil, nil)
	if a["ok"] != false {
		t.Errorf("action form: %v", a)
	}

	// A damaged document.
	plan(t, r, "gold", 100)
	r.env.KV.Put(context.Background(), "/router/subscribers/plans/bad", "{")
	_, m = r.do("GET", "/doctor", nil)
	if !has(findings(t, m), "critical", "configuration", "subscribers/plans/bad") {
		t.Errorf("broken document not found: %v", m["findings"])
	}
	r.env.KV.Delete(context.Background(), "/router/subscribers/plans/bad")

	// Alerts: DHCP down is a dhcp alert; netcfg's absence has no type.
	_, al := r.do("GET", "/alerts", nil)
	found := false
	for _, x := range al["alerts"].([]any) {
		x := x.(map[string]any)
		if x["type"] == "dhcp" && x["severity"] == "critical" {
			found = true
		}
		if x["type"] == "" || x["message"] == "" {
			t.Errorf("alert %v", x)
		}
	}
	if !found || int(al["count"].(float64)) != len(al["alerts"].([]any)) || al["generated"] == "" {
		t.Errorf("alerts: %v", al)
	}
}

func TestDoctorHealthy(t *testing.T) {
	r := newRig(t, false, func(d *system.Deps) { d.Expect = []string{"subscribers", "system"} })
	plan(t, r, "gold", 100)
	r.expect(201, "POST", "config-save", nil, nil)
	_, m := r.do("GET", "/doctor", nil)
	for _, f := range findings(t, m) {
		if f["severity"] == "critical" || f["area"] == "configuration" || f["area"] == "subscribers" {
			t.Errorf("healthy router: %v", f)
		}
	}
	if m["ok"] != true {
		t.Errorf("ok %v", m)
	}
	plan(t, r, "silver", 100)
	_, m = r.do("GET", "/doctor", nil)
	if !has(findings(t, m), "info", "configuration", "differs from the latest saved version (1)") {
		t.Errorf("unsaved change not reported: %v", m["findings"])
	}
}

// TestAlertsStrangers: a device.unknown event in the stream is a stranger
// alert.
func TestAlertsStrangers(t *testing.T) {
	r := newRig(t, false, func(d *system.Deps) { d.Expect = []string{"subscribers", "system"} })
	if err := bus.EnsureStream(context.Background(), r.env.NC); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(r.env.NC, "dhcp", testenv.Log(t))
	if err := pub.Send(event.DeviceUnknown, nil, map[string]any{"mac": "02:00:00:00:00:99", "iface": "sub0"}); err != nil {
		t.Fatal(err)
	}
	_, al := r.do("GET", "/alerts", nil)
	alerts := al["alerts"].([]any)
	if len(alerts) != 1 || alerts[0].(map[string]any)["type"] != "stranger" || !strings.Contains(alerts[0].(map[string]any)["message"].(string), "02:00:00:00:00:99") {
		t.Errorf("alerts: %v", al)
	}
}
