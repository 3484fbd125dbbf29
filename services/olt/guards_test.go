package olt_test

import (
	"strings"
	"testing"
)

// A registered OLT with this router's S-VLAN is shared: the router touches
// only what is its own (Document 3, Shared OLTs), through the API.
func TestSharedOLTGuards(t *testing.T) {
	r := start(t)
	r.register(t, "shared", map[string]any{"svlan": 3000, "operator": true})
	refused := func(a answer, overridable bool) {
		t.Helper()
		envelope(t, a, a.body["op"].(string), 502)
		e, _ := a.body["error"].(string)
		if !strings.Contains(e, "refused on a shared OLT") || strings.Contains(e, "force=true overrides") != overridable {
			t.Errorf("refusal: %s", a.raw)
		}
	}
	before := r.sim.OLT(0).Received("vlan 100")
	// Another VLAN than the S-VLAN: refused unless force.
	refused(r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 100}, nil), true)
	if r.sim.OLT(0).Received("vlan 100") != before {
		t.Error("a refused vlan-add was sent")
	}
	envelope(t, r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 3000, "attribute": "stacking"}, nil), "vlan-add", 200)
	envelope(t, r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 100, "force": true}, nil), "vlan-add", 200)
	// exec needs force.
	refused(r.do(t, "POST", "/olt/exec", map[string]any{"commands": []string{"display version"}}, nil), true)
	// An ONT whose service-port is on another S-VLAN: never, force or not.
	id := r.sim.OLT(0).AddServicePort(100, simPort, 5, 1, 100)
	_ = id
	for _, force := range []bool{false, true} {
		refused(r.do(t, "POST", "/olt/ont-deactivate", map[string]any{"port": simPort, "ont_id": 5, "force": force}, nil), false)
	}
	// Objects the router creates carry its prefix s<svlan>.
	a := r.do(t, "POST", "/olt/ont-add", map[string]any{"port": simPort, "sn": simSN, "vlan": 100, "down_kbps": 10000, "up_kbps": 10000, "dry_run": true}, nil)
	envelope(t, a, "ont-add", 200)
	if !strings.Contains(a.raw, "s3000_") || !strings.Contains(a.raw, "service-port vlan 3000") {
		t.Errorf("dry run on a shared OLT: %s", a.raw)
	}
}
