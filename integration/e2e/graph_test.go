package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLabGraph: with samples every 500 ms (graph_sample_ms), GET
// /graph/up0?period=hour answers 404 JSON until the first rates, then an
// image/png; after bounded pings from the uplink its in curve (green)
// shows; a bad period is 400 naming it; a shaped client's graph, asked
// by its MAC in another format, shows its download.
func TestLabGraph(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	r := startGraphLab(t)

	get := r.get
	// green counts the PNG's pixels of the in curve's colour.
	green := func(body []byte) (int, error) {
		img, err := png.Decode(bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		n := 0
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if r, g, b, _ := img.At(x, y).RGBA(); r == 0 && g == 200*0x101 && b == 0 {
					n++
				}
			}
		}
		return n, nil
	}

	if st, ct, body := get("/graph/up0?period=fortnight"); st != 400 || ct != "application/json" || !bytes.Contains(body, []byte(`"period"`)) {
		t.Fatalf("bad period: %d %s %s", st, ct, body)
	}
	eventually(t, 20*time.Second, func() error {
		st, ct, body := get("/graph/up0?period=hour")
		switch {
		case st == 404 && ct == "application/json":
			var e map[string]any
			if json.Unmarshal(body, &e) != nil || e["error"] == nil {
				t.Fatalf("404 without {error}: %s", body)
			}
			return fmt.Errorf("no samples yet: %s", body)
		case st == 200 && ct == "image/png":
			return nil
		}
		t.Fatalf("GET /graph/up0: %d %s %.300s", st, ct, body)
		return nil
	})
	out, err := exec.Command("ip", "netns", "exec", r.prefix+"-uplink", "ping", "-q", "-c", "20", "-i", "0.1", "-s", "1400", "-W", "1", "198.18.0.2").CombinedOutput()
	if err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	eventually(t, 20*time.Second, func() error {
		st, ct, body := get("/graph/up0?period=hour")
		if st != 200 || ct != "image/png" {
			return fmt.Errorf("GET /graph/up0: %d %s %.300s", st, ct, body)
		}
		n, err := green(body)
		if err != nil {
			t.Fatalf("not a PNG: %v", err)
		}
		if n < 10 {
			return fmt.Errorf("no in traffic drawn yet (%d green pixels)", n)
		}
		return nil
	})
	if st, _, body := get("/graph/nosuch9?period=hour"); st != 404 {
		t.Errorf("unknown interface: %d %s", st, body)
	}

	// A shaped client (the subscriber namespace's eth0 with its address):
	// its graph by its MAC in another format, download drawn from the
	// shaper's counters once it has pinged the gateway.
	inSub := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"netns", "exec", r.prefix + "-sub"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	mac := strings.TrimSpace(inSub("cat", "/sys/class/net/eth0/address"))
	r.must("POST", "/plans", map[string]any{"name": "graph-plan", "down_mbps": 50, "up_mbps": 10}, 201)
	r.must("POST", "/clients", map[string]any{"mac": mac, "ip": "10.77.0.62", "hostname": "graph-cpe", "plan": "graph-plan"}, 201)
	inSub("ip", "addr", "replace", "10.77.0.62/24", "dev", "eth0")
	dashed := strings.ToUpper(strings.ReplaceAll(mac, ":", "-"))
	eventually(t, 30*time.Second, func() error {
		inSub("ping", "-q", "-c", "5", "-i", "0.1", "-s", "1400", "-W", "1", "10.77.0.1")
		st, ct, body := get("/graph/" + dashed + "?period=hour")
		if st != 200 || ct != "image/png" {
			return fmt.Errorf("GET /graph/%s: %d %s %.300s", dashed, st, ct, body)
		}
		n, err := green(body)
		if err != nil {
			t.Fatalf("not a PNG: %v", err)
		}
		if n < 10 {
			return fmt.Errorf("no download drawn yet (%d green pixels)", n)
		}
		return nil
	})
}

// TestLabOLTGraph: with samples every 500 ms the lab's simulated OLT's
// counters are read and GET /graph/oltport (a PON port, a card, an
// uplink) and /graph/ont (traffic and errors) answer image/png with the
// traffic drawn; bad parameters are 400 naming the field, an unknown OLT
// 404.
func TestLabOLTGraph(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	r := startGraphLab(t)
	get := r.get

	// An ONT on PON port 0/1/0, from the lab OLT's autofind list.
	m := r.must("POST", "/olt/autofind", map[string]any{"olt": "lab"}, 200)
	sn := m["result"].(map[string]any)["onts"].([]any)[0].(map[string]any)["sn"].(string)
	r.must("GET", "/api?action=olt-vlan-add&olt=lab&vlan=200&uplinks=0/3/0", nil, 200)
	m = r.must("POST", "/olt/ont-add", map[string]any{"olt": "lab", "port": "0/1/0", "sn": sn, "vlan": 200, "down_kbps": 10000, "up_kbps": 5000}, 200)
	ont := fmt.Sprint(m["result"].(map[string]any)["ont_id"])

	for path, field := range map[string]string{
		"/graph/oltport?olt=lab":                             "port",
		"/graph/oltport?olt=lab&port=0/1/0&period=fortnight": "period",
		"/graph/oltport?olt=lab&port=0/1/0&pon=2":            "pon",
		"/graph/ont?olt=lab&port=0/1/0&ont=0&what=bogus":     "what",
		"/graph/ont?olt=lab&port=0/1/0":                      "ont",
	} {
		if st, _, body := get(path); st != 400 || !bytes.Contains(body, []byte(`"`+field+`"`)) {
			t.Errorf("%s: %d %s", path, st, body)
		}
	}
	drawn := func(path string, minGreen int) {
		t.Helper()
		eventually(t, 30*time.Second, func() error {
			st, ct, body := get(path)
			if st != 200 || ct != "image/png" {
				return fmt.Errorf("GET %s: %d %s %.300s", path, st, ct, body)
			}
			img, err := png.Decode(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("%s: not a PNG: %v", path, err)
			}
			n := 0
			b := img.Bounds()
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					if r, g, b, _ := img.At(x, y).RGBA(); r == 0 && g == 200*0x101 && b == 0 {
						n++
					}
				}
			}
			if n < minGreen {
				return fmt.Errorf("%s: %d green pixels", path, n)
			}
			return nil
		})
	}
	drawn("/graph/oltport?olt=lab&port=0/1/0&period=hour", 10)
	drawn("/graph/oltport?olt=lab&port=0/1&period=quarter", 1)
	drawn("/graph/oltport?olt=lab&port=0/3/0&pon=0&period=hour", 10)
	drawn("/graph/ont?olt=lab&port=0/1/0&ont="+ont+"&period=hour", 10)
	drawn("/graph/ont?olt=lab&port=0/1/0&ont="+ont+"&what=errors&period=2years", 0)
	if st, ct, body := get("/graph/oltport?olt=nosuch&port=0/1/0"); st != 404 || ct != "application/json" {
		t.Errorf("unknown OLT: %d %s %s", st, ct, body)
	}
}

// startGraphLab starts routerd --lab sampling every 500 ms
// (graph_sample_ms), so graphs have data within seconds.
func startGraphLab(t *testing.T) *routerd {
	t.Helper()
	config := filepath.Join(t.TempDir(), "routerd.yaml")
	if err := os.WriteFile(config, []byte("graph_sample_ms: 500\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startLab(t, binary(t), uniquePrefix(), t.TempDir(), "--config", config)
}

// get fetches path with the API key: its status, content type and body
// as they are (a PNG, or JSON).
func (r *routerd) get(path string) (int, string, []byte) {
	r.t.Helper()
	req, _ := http.NewRequest("GET", r.url+path, nil)
	req.Header.Set("X-API-Key", r.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}
