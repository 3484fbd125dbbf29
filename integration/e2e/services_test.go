package e2e

import (
	"net"
	"os"
	"testing"
)

// routerd --lab: GET /services/unregistered lists the ONTs waiting on
// the lab's simulated OLT with the S-VLAN of its record and the PON
// port's C-VLAN (0/1/0: 116); an OLT that cannot be asked is named in
// errors while the others' ONTs are still listed; an unknown olt is a
// 404; the action form answers the same.
func TestLabUnregisteredONTs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	r := startLab(t, binary(t), uniquePrefix(), t.TempDir())

	m := r.must("GET", "/services/unregistered", nil, 200)
	onts, _ := m["onts"].([]any)
	if m["count"] != float64(2) || len(onts) != 2 || len(m["errors"].(map[string]any)) != 0 || m["next"] == "" {
		t.Fatalf("unregistered: %v", m)
	}
	for _, o := range onts {
		o := o.(map[string]any)
		if o["olt"] != "lab" || o["pon"] != "0/1/0" || o["cvlan"] != float64(116) || o["svlan"] != nil || len(o["sn"].(string)) != 16 {
			t.Errorf("ONT: %v", o)
		}
	}

	// The OLT's S-VLAN for this router, and a second OLT nothing answers
	// for (a port just closed).
	r.must("POST", "/olts/lab", map[string]any{"svlan": 300}, 200)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r.must("POST", "/olts", map[string]any{"name": "dead", "host": "127.0.0.1", "port": dead, "user": "u", "pass": "p"}, 201)
	m = r.must("GET", "/services/unregistered", nil, 200)
	errs := m["errors"].(map[string]any)
	if m["count"] != float64(2) || errs["dead"] == nil || errs["dead"] == "" || errs["lab"] != nil {
		t.Fatalf("with a dead OLT: %v", m)
	}
	if o := m["onts"].([]any)[0].(map[string]any); o["svlan"] != float64(300) || o["cvlan"] != float64(116) {
		t.Errorf("ONT with the OLT's S-VLAN: %v", o)
	}
	m = r.must("GET", "/services/unregistered?olt=lab", nil, 200)
	if m["count"] != float64(2) || len(m["errors"].(map[string]any)) != 0 {
		t.Errorf("olt=lab: %v", m)
	}
	r.must("GET", "/services/unregistered?olt=nosuch", nil, 404)
	m = r.must("GET", "/api?action=service-unregistered&olt=lab", nil, 200)
	if m["count"] != float64(2) {
		t.Errorf("action form: %v", m)
	}
}
