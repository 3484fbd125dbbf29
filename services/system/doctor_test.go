package system_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
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
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, system.LicenceFile), []byte(`{"features": ["olt-write"]}`), 0o600)
	r := newRig(t, false, func(d *system.Deps) { d.Expect = []string{"subscribers", "system"}; d.StateDir = dir })
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

func alertsOf(t *testing.T, r *rig) []map[string]any {
	t.Helper()
	st, m := r.do("GET", "/alerts", nil)
	if st != 200 {
		t.Fatalf("alerts: %d %v", st, m)
	}
	var out []map[string]any
	for _, a := range m["alerts"].([]any) {
		out = append(out, a.(map[string]any))
	}
	return out
}

// TestLicenceAlerts: a missing, invalid or expired licence is a licence
// alert; a valid one none.
func TestLicenceAlerts(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, false, func(d *system.Deps) { d.Expect = []string{"subscribers", "system"}; d.StateDir = dir })
	for _, c := range []struct{ content, severity, text string }{
		{"", "warning", "no licence is installed"},
		{"{bad", "warning", "the licence is invalid"},
		{`{"features": ["olt-write"], "expires": "2020-01-31"}`, "critical", "the licence has expired"},
		{`{"features": ["olt-write"], "expires": "2999-01-31"}`, "", ""},
	} {
		os.Remove(filepath.Join(dir, system.LicenceFile))
		if c.content != "" {
			os.WriteFile(filepath.Join(dir, system.LicenceFile), []byte(c.content), 0o600)
		}
		var got []map[string]any
		for _, a := range alertsOf(t, r) {
			if a["type"] == "licence" {
				got = append(got, a)
			}
		}
		if c.text == "" && len(got) != 0 || c.text != "" && (len(got) != 1 || got[0]["severity"] != c.severity || !strings.Contains(got[0]["message"].(string), c.text)) {
			t.Errorf("licence %q: alerts %v", c.content, got)
		}
	}
}

// TestOLTAlerts: an OLT unreachable is an olt alert naming it until it is
// reachable again; an ONT with optical power out of range a fiber alert
// with the OLT, port and ONT.
func TestOLTAlerts(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, system.LicenceFile), []byte(`{"features": []}`), 0o600)
	r := newRig(t, false, func(d *system.Deps) { d.Expect = []string{"subscribers", "system"}; d.StateDir = dir })
	if err := bus.EnsureStream(context.Background(), r.env.NC); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(r.env.NC, "olt", testenv.Log(t))
	send := func(kind string, data map[string]any) {
		if err := pub.Send(kind, nil, data); err != nil {
			t.Fatal(err)
		}
	}
	send("olt.unreachable", map[string]any{"olt": "pop1", "host": "192.0.2.9", "error": "dial timeout"})
	send("ont.optical", map[string]any{"olt": "pop1", "port": "0/1/0", "ont_id": 3, "rx_power_dbm": -29.5, "min": -27, "max": -8})
	find := func(typ string) map[string]any {
		for _, a := range alertsOf(t, r) {
			if a["type"] == typ {
				return a
			}
		}
		return nil
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		o, f := find("olt"), find("fiber")
		if o == nil || o["olt"] != "pop1" || o["severity"] != "critical" || f == nil || f["port"] != "0/1/0" || f["ont"] != "3" {
			return fmt.Errorf("alerts: olt %v fiber %v", o, f)
		}
		return nil
	})
	send("olt.reachable", map[string]any{"olt": "pop1", "host": "192.0.2.9"})
	testenv.Eventually(t, 5*time.Second, func() error {
		if o := find("olt"); o != nil {
			return fmt.Errorf("olt alert after reachable: %v", o)
		}
		return nil
	})
}

// TestDoctorSNMP: an SNMP agent set up (a community stored) but not
// answering is a warning naming why, as the graph service reports it;
// one answering, or never set up, is no finding. The graph service is
// stood in on the bus: its own tests make the port taken for real
// (TestSNMPPortTaken).
func TestDoctorSNMP(t *testing.T) {
	r := newRig(t, false, func(d *system.Deps) { d.Expect = []string{"subscribers", "system", "graph"} })
	state := make(chan api.SNMPState, 1)
	state <- api.SNMPState{Enabled: "yes", Listen: "udp:161, udp6:161", Problem: "cannot listen on udp:161: address already in use"}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go bus.Run(ctx, r.env.NC, bus.ServiceConfig{Name: "graph", Version: "0.0.0", Log: testenv.Log(t), Endpoints: []bus.Endpoint{
		bus.Bind(api.SNMPStatus, func(context.Context, *api.None) (*api.SNMPState, error) {
			st := <-state
			state <- st
			return &st, nil
		}),
	}})
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, r.env.NC, "graph"); missing != nil {
		t.Fatal("the stand-in did not register")
	}
	_, m := r.do("GET", "/doctor", nil)
	if !has(findings(t, m), "warning", "snmp", "not answering on udp:161, udp6:161") {
		t.Errorf("agent down not reported: %v", m["findings"])
	}
	for _, f := range findings(t, m) {
		if f["area"] == "snmp" && !strings.Contains(f["detail"].(string), "address already in use") {
			t.Errorf("finding without the agent's reason: %v", f)
		}
	}
	for _, st := range []api.SNMPState{{Enabled: "yes", Running: true}, {Enabled: "no"}} {
		<-state
		state <- st
		_, m = r.do("GET", "/doctor", nil)
		for _, f := range findings(t, m) {
			if f["area"] == "snmp" {
				t.Errorf("%+v: %v", st, f)
			}
		}
	}
}
