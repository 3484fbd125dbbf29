package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestLabDoctorDrift: once the network is managed, a port changed behind
// routerd's back (its MTU set by hand) is a configuration drift finding of
// GET /doctor, and none is left once it is put back.
func TestLabDoctorDrift(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	r := networkLab(t, binary(t), uniquePrefix(), t.TempDir(), 120, true)
	drift := func() []string {
		var out []string
		for _, f := range r.must("GET", "/doctor", nil, 200)["findings"].([]any) {
			if p := f.(map[string]any)["problem"].(string); strings.HasPrefix(p, "configuration drift") {
				out = append(out, p)
			}
		}
		return out
	}
	if d := drift(); len(d) != 0 {
		t.Fatalf("drift right after adopt: %q", d)
	}
	was := r.mtu("sub0")
	r.inRouter("ip", "link", "set", "sub0", "mtu", "1400")
	if d := drift(); len(d) != 1 || !strings.Contains(d[0], "sub0") {
		t.Errorf("drift after a hand-made MTU change: %q", d)
	}
	r.inRouter("ip", "link", "set", "sub0", "mtu", was)
	if d := drift(); len(d) != 0 {
		t.Errorf("drift after putting it back: %q", d)
	}
}
