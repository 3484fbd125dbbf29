package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLabBackupRestore: plans and routes configured, a version saved, a
// change shown by config-diff, GET /backup; the state destroyed (routerd
// stopped, its state directory wiped, started fresh); POST /restore with the
// archive brings every plan and route back, with the kernel's routes as
// before; restoring undo_file returns to the fresh router.
func TestLabBackupRestore(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	bin, prefix := binary(t), uniquePrefix()
	state := filepath.Join(t.TempDir(), "state")
	r := startLab(t, bin, prefix, state)
	fresh := r.must("GET", "/routes", nil, 200)["managed"].([]any)

	r.must("POST", "/plans", map[string]any{"name": "gold", "down_mbps": 500, "up_mbps": 100}, 201)
	r.must("POST", "/plans", map[string]any{"name": "silver", "down_mbps": 100, "up_mbps": 20}, 201)
	r.must("POST", "/routes", map[string]any{"prefix": "10.50.0.0/16", "via": "198.18.0.1", "comment": "pop"}, 201)
	r.must("POST", "/routes", map[string]any{"prefix": "2001:db8:50::/48", "via": "2001:db8:ffff::1"}, 201)

	saved := r.must("POST", "/api?action=config-save&comment=configured", nil, 201)
	if saved["version"].(float64) != 1 {
		t.Fatalf("config-save: %v", saved)
	}
	if st, _ := r.call("GET", "/api?action=config-save", nil); st != 405 {
		t.Errorf("GET config-save: %d", st)
	}
	if s := r.must("GET", "/api?action=config-status", nil, 200); s["unsaved"] != false {
		t.Errorf("config-status after save: %v", s)
	}
	r.must("POST", "/plans", map[string]any{"name": "bronze", "down_mbps": 10, "up_mbps": 5}, 201)
	d := r.must("GET", "/api?action=config-diff&from=1", nil, 200)
	if !strings.Contains(d["diff"].(string), `+            "name": "bronze",`) {
		t.Errorf("config-diff: %v", d)
	}
	r.must("POST", "/api?action=config-save", map[string]any{"comment": "bronze too"}, 201)

	v4, v6 := r.inRouter("ip", "route", "show", "proto", "213"), r.inRouter("ip", "-6", "route", "show", "proto", "213")
	if !strings.Contains(v4, "10.50.0.0/16 via 198.18.0.1") || !strings.Contains(v6, "2001:db8:50::/48 via 2001:db8:ffff::1") {
		t.Fatalf("kernel routes:\n%s%s", v4, v6)
	}
	plans := sysPlanNames(t, r)

	req, _ := http.NewRequest("GET", r.url+"/backup", nil)
	req.Header.Set("X-API-Key", r.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gzip" ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), ".tar.gz") {
		t.Fatalf("backup: %d %v %.300s", resp.StatusCode, resp.Header, archive)
	}
	file := filepath.Join(t.TempDir(), "backup.tar.gz")
	if err := os.WriteFile(file, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	doc := r.must("GET", "/doctor", nil, 200)
	for _, f := range doc["findings"].([]any) {
		f := f.(map[string]any)
		t.Logf("doctor: %s %s: %s (%s)", f["severity"], f["area"], f["problem"], f["detail"])
		if a := f["area"]; (a == "dhcp" || a == "interface" || a == "dhcp-pool" || a == "configuration") && f["severity"] != "info" {
			t.Errorf("the lab's DHCP serving sub0 is a finding: %v", f)
		}
	}

	// Destroy the state and start fresh.
	r.stop()
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	r = startLab(t, bin, prefix, state)
	if got := sysPlanNames(t, r); got != "" {
		t.Fatalf("fresh router has plans %s", got)
	}
	if r.inRouter("ip", "route", "show", "proto", "213") != "" {
		t.Fatalf("fresh router has routes")
	}

	res := r.must("POST", "/restore", map[string]any{"file": file}, 200)
	docs := strings.Join(sysStrings(res["documents"]), ",")
	if !strings.Contains(docs, "etc/plans.json") || !strings.Contains(docs, "etc/routes.json") || res["undo_version"].(float64) != 1 {
		t.Fatalf("restore: %v", res)
	}
	if got := sysPlanNames(t, r); got != plans {
		t.Errorf("plans after restore: %s, want %s", got, plans)
	}
	if got := r.inRouter("ip", "route", "show", "proto", "213"); got != v4 {
		t.Errorf("ip route after restore:\n%s\nwant\n%s", got, v4)
	}
	if got := r.inRouter("ip", "-6", "route", "show", "proto", "213"); got != v6 {
		t.Errorf("ip -6 route after restore:\n%s\nwant\n%s", got, v6)
	}
	if s := r.must("GET", "/api?action=config-status", nil, 200); s["latest"].(float64) != 1 || s["unsaved"] != true {
		t.Errorf("config-status after restore: %v", s)
	}

	// Undo: back to the fresh router.
	r.must("POST", "/restore", map[string]any{"file": res["undo_file"]}, 200)
	if got := sysPlanNames(t, r); got != "" {
		t.Errorf("plans after undo: %s", got)
	}
	if got := r.inRouter("ip", "route", "show", "proto", "213"); got != "" {
		t.Errorf("routes after undo:\n%s", got)
	}
	if got := r.must("GET", "/routes", nil, 200)["managed"].([]any); len(got) != len(fresh) {
		t.Errorf("managed routes after undo: %v", got)
	}

	// DHCP reservations travel as etc/dhcp-reservations.json: one brought
	// in by a restore is in the next backup.
	resv := `{"clients": [{"mac": "02:aa:00:00:00:07", "ip": "10.77.0.57", "hostname": "cpe7"}], "services": [{"id": "svc_7", "pon": "0/1/0", "ont_id": 7, "ipv4": "10.77.0.58"}]}`
	file = filepath.Join(t.TempDir(), "resv.tar.gz")
	sysArchive(t, file, map[string]string{"etc/dhcp-reservations.json": resv})
	if res := r.must("POST", "/restore", map[string]any{"file": file}, 200); strings.Join(sysStrings(res["documents"]), ",") != "etc/dhcp-reservations.json" {
		t.Errorf("restore of reservations: %v", res)
	}
	got := sysBackupFile(t, r, "etc/dhcp-reservations.json")
	if !strings.Contains(got, `"mac": "02:AA:00:00:00:07"`) || !strings.Contains(got, `"ip": "10.77.0.57"`) || !strings.Contains(got, `"id": "svc_7"`) {
		t.Errorf("reservations in the backup:\n%s", got)
	}

	// The served interface loses its address: a critical interface
	// finding, and an interface alert.
	r.inRouter("ip", "-4", "addr", "flush", "dev", "sub0")
	eventually(t, 20*time.Second, func() error {
		doc := r.must("GET", "/doctor", nil, 200)
		found := false
		for _, f := range doc["findings"].([]any) {
			if f := f.(map[string]any); f["area"] == "interface" && f["severity"] == "critical" && strings.Contains(f["problem"].(string), "sub0") {
				found = true
			}
		}
		al := r.must("GET", "/alerts", nil, 200)
		alerted := false
		for _, a := range al["alerts"].([]any) {
			if a := a.(map[string]any); a["type"] == "interface" && strings.Contains(a["message"].(string), "sub0") {
				alerted = true
			}
		}
		if !found || doc["ok"] != false || !alerted {
			return fmt.Errorf("no interface finding and alert for sub0: %v %v", doc["findings"], al["alerts"])
		}
		return nil
	})
}

// sysArchive writes a tar.gz of files.
func sysArchive(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, c := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(c))
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sysBackupFile fetches GET /backup and returns one file of it.
func sysBackupFile(t *testing.T, r *routerd, name string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", r.url+"/backup", nil)
	req.Header.Set("X-API-Key", r.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	gz, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatalf("backup: %d: %v", resp.StatusCode, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the backup: %v", name, err)
		}
		if h.Name == name {
			b, _ := io.ReadAll(tr)
			return string(b)
		}
	}
}

func sysPlanNames(t *testing.T, r *routerd) string {
	t.Helper()
	var out []string
	for _, p := range r.must("GET", "/plans", nil, 200)["plans"].([]any) {
		out = append(out, p.(map[string]any)["name"].(string))
	}
	return strings.Join(out, ",")
}

func sysStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}
