package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// routerd --lab registers a simulated OLT as "lab": an operator lists the
// ONTs waiting on it, provisions one with a plan, sees it in onus and
// serviceports, and saves, all through the API.
func TestLabOLT(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	state, bin := t.TempDir(), binary(t)
	r := startLab(t, bin, uniquePrefix(), state)

	m := r.must("GET", "/olts", nil, 200)
	if m["count"] != float64(1) {
		t.Fatalf("olts: %v", m)
	}
	rec := m["olts"].([]any)[0].(map[string]any)
	if rec["name"] != "lab" || rec["password_set"] != true || rec["pass"] != nil {
		t.Errorf("lab OLT record: %v", rec)
	}
	if fi, err := os.Stat(filepath.Join(state, "olt-credentials.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("sealing key: %v %v", fi, err)
	}
	ops := r.must("GET", "/olt", nil, 200)
	if len(ops["ops"].([]any)) != 32 {
		t.Errorf("GET /olt: %v", ops)
	}

	// The only registered OLT is chosen without naming it.
	m = r.must("POST", "/olt/autofind", map[string]any{}, 200)
	res := m["result"].(map[string]any)
	if res["count"] != float64(2) || m["olt"].(map[string]any)["name"] != "lab" {
		t.Fatalf("autofind: %v", m)
	}
	sn := res["onts"].([]any)[0].(map[string]any)["sn"].(string)

	r.must("POST", "/plans", map[string]any{"name": "fibre100", "down_mbps": 100, "up_mbps": 50}, 201)
	r.must("GET", "/api?action=olt-vlan-add&olt=lab&vlan=200&uplinks=0/3/0", nil, 200)
	r.must("POST", "/olt/ont-add", map[string]any{"olt": "lab", "port": "0/1/0", "sn": sn, "vlan": 200, "plan": "nosuch"}, 404)
	m = r.must("POST", "/olt/ont-add", map[string]any{"olt": "lab", "port": "0/1/0", "sn": sn, "vlan": 200,
		"plan": "fibre100", "description": "flat 3"}, 200)
	if m["ok"] != true || m["note"] == nil || m["result"].(map[string]any)["sn"] != sn {
		t.Errorf("ont-add: %v", m)
	}
	m = r.must("POST", "/olt/onus", map[string]any{"olt": "lab", "port": "0/1/0"}, 200)
	if res := m["result"].(map[string]any); res["count"] != float64(1) || res["onts"].([]any)[0].(map[string]any)["sn"] != sn {
		t.Errorf("onus: %v", m)
	}
	m = r.must("POST", "/olt/serviceports", map[string]any{"olt": "lab"}, 200)
	if res := m["result"].(map[string]any); res["count"] != float64(1) {
		t.Errorf("serviceports: %v", m)
	}
	m = r.must("POST", "/olt/autofind", map[string]any{"olt": "lab"}, 200)
	if res := m["result"].(map[string]any); res["count"] != float64(1) {
		t.Errorf("autofind after ont-add: %v", m)
	}
	if m = r.must("POST", "/olt/save", map[string]any{"olt": "lab"}, 200); m["note"] != nil {
		t.Errorf("save: %v", m)
	}
	m = r.must("POST", "/olt/config", map[string]any{"olt": "lab"}, 200)
	if cfg := m["result"].(map[string]any)["config"].(string); !strings.Contains(cfg, sn) {
		t.Errorf("running configuration lacks the ONT")
	}
	// Back up, change, diff.
	m = r.must("POST", "/olt/backup", map[string]any{"olt": "lab"}, 200)
	if b := m["backups"].([]any)[0].(map[string]any); b["rev"] != float64(1) || b["changed"] != true {
		t.Errorf("backup: %v", m)
	}
	r.must("POST", "/olt/ont-desc", map[string]any{"olt": "lab", "port": "0/1/0", "ont_id": 0, "description": "flat 3b"}, 200)
	m = r.must("GET", "/api?action=olt-diff&olt=lab", nil, 200)
	if d, _ := m["diff"].(string); m["changed"] != true || !strings.Contains(d, "flat 3b") || !strings.Contains(d, "--- rev 1") {
		t.Errorf("diff: %v", m)
	}
	r.must("POST", "/olt/backup", map[string]any{}, 200)
	if m = r.must("GET", "/olt/backups?olt=lab", nil, 200); m["count"] != float64(2) {
		t.Errorf("backups: %v", m)
	}
	r.must("GET", "/olt/info", nil, 405)
	r.must("POST", "/olt/nosuch", map[string]any{}, 404)

	// The doctor's OLT check (?olt=1) audits each registered OLT on its
	// S-VLAN: 200 exists and is tagged on 0/3/0; 300 does not exist.
	oltFindings := func() []string {
		var out []string
		for _, f := range r.must("GET", "/doctor?olt=1", nil, 200)["findings"].([]any) {
			if f := f.(map[string]any); f["area"] == "olt" {
				out = append(out, fmt.Sprint(f["severity"], ": ", f["problem"], " (", f["detail"], ")"))
			}
		}
		return out
	}
	if f := oltFindings(); len(f) != 1 || !strings.Contains(f[0], "no S-VLAN is set") {
		t.Errorf("doctor olt=1 without an S-VLAN: %q", f)
	}
	r.must("POST", "/olts/lab", map[string]any{"svlan": 300}, 200)
	if f := oltFindings(); len(f) != 1 || !strings.Contains(f[0], "critical: OLT lab: S-VLAN 300 does not exist") {
		t.Errorf("doctor olt=1 on a missing S-VLAN: %q", f)
	}
	r.must("POST", "/olts/lab", map[string]any{"svlan": 200}, 200)
	for _, f := range oltFindings() {
		if strings.HasPrefix(f, "critical") {
			t.Errorf("doctor olt=1 on S-VLAN 200, tagged on the uplink: %s", f)
		}
	}
	r.must("POST", "/olts/lab", map[string]any{"svlan": 0}, 200)

	// Restart with the same state directory: the registration (and its
	// sealed password, re-sealed for the new simulator) is still there.
	r.stop()
	r = startLab(t, bin, r.prefix, state)
	if m := r.must("GET", "/olts", nil, 200); m["count"] != float64(1) {
		t.Errorf("olts after restart: %v", m)
	}
	r.must("POST", "/olt/info", map[string]any{"olt": "lab"}, 200)
	if strings.Contains(r.stderr.String(), "pass=") {
		t.Errorf("routerd logged a password field")
	}
}
