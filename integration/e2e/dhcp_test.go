package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestLabServedNetworks drives the served-network operations of routerd
// --lab over HTTP: the lab's subscriber port is taken out of DHCP and put
// back with POST /net, and a real client in the subscriber namespace gets
// a lease from the network added; a change the DHCP server refuses is
// rolled back.
func TestLabServedNetworks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	if _, err := exec.LookPath("udhcpc"); err != nil {
		t.Skip("udhcpc not installed")
	}
	prefix := uniquePrefix()
	r := startLab(t, binary(t), prefix, t.TempDir())

	m := r.must("GET", "/networks", nil, 200)
	nets, _ := m["networks"].([]any)
	if m["count"].(float64) != 1 || len(nets) != 1 {
		t.Fatalf("GET /networks: %v", m)
	}
	if n := nets[0].(map[string]any); n["iface"] != "sub0" || n["network"] != "10.77.0.0/24" || n["mask"] != "255.255.255.0" ||
		n["bcast"] != "10.77.0.255" || n["cidr"].(float64) != 24 || n["ipv6"] != "2001:db8:77::/64" {
		t.Errorf("served network: %v", n)
	}
	for _, p := range []string{"/interfaces", "/net", "/net6", "/api?action=interfaces"} {
		m := r.must("GET", p, nil, 200)
		found := false
		for _, i := range m["interfaces"].([]any) {
			if i := i.(map[string]any); i["iface"] == "sub0" {
				found = i["dhcp_active"] == true && i["dhcp6_active"] == true && i["gateway"] == "10.77.0.1"
			}
		}
		if !found {
			t.Errorf("GET %s: sub0 not listed active: %v", p, m)
		}
	}
	r.must("GET", "/api?action=networks", nil, 200)

	// Out of DHCP: no answer for the client.
	if m := r.must("DELETE", "/net", map[string]any{"iface": "sub0"}, 200); m["network"].(map[string]any)["network"] != "10.77.0.0/24" {
		t.Errorf("DELETE /net: %v", m)
	}
	udhcpc := func() (string, error) {
		out, err := exec.Command("ip", "netns", "exec", prefix+"-sub", "udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "3", "-T", "1", "-s", "/bin/true").CombinedOutput()
		return string(out), err
	}
	if out, err := udhcpc(); err == nil {
		t.Errorf("udhcpc got a lease from an unserved network:\n%s", out)
	}
	r.must("DELETE", "/net", map[string]any{"iface": "sub0"}, 500)

	// Back in through the action form; the client gets a lease.
	m = r.must("GET", "/api?action=add-net&iface=sub0&label=lab", nil, 201)
	if m["label"] != "lab" || m["network"].(map[string]any)["gateway"] != "10.77.0.1" {
		t.Errorf("add-net: %v", m)
	}
	out, err := udhcpc()
	if err != nil || !regexp.MustCompile(`lease of 10\.77\.0\.\d+ obtained from 10\.77\.0\.1`).MatchString(out) {
		t.Errorf("udhcpc after add-net: %v\n%s", err, out)
	}

	// 404: an interface without an IPv4 address; a refused change rolls
	// back (a second network overlapping the served one).
	r.inRouter("ip", "link", "add", "e2ex", "type", "veth", "peer", "name", "e2ey")
	r.must("POST", "/net", map[string]any{"iface": "e2ex"}, 404)
	r.inRouter("ip", "addr", "add", "10.77.0.130/25", "dev", "e2ex")
	m = r.must("POST", "/net", map[string]any{"iface": "e2ex"}, 500)
	if msg, _ := m["error"].(string); !strings.HasSuffix(msg, "rolled back") || m["detail"] == nil {
		t.Errorf("refused change: %v", m)
	}
	if m := r.must("GET", "/networks", nil, 200); m["count"].(float64) != 1 {
		t.Errorf("after a refused change: %v", m)
	}
	r.must("POST", "/net", map[string]any{"iface": "bad name!"}, 400)

	if m := r.must("POST", "/dhcp/reload", nil, 200); m["ok"] != true {
		t.Errorf("reload: %v", m)
	}
	r.must("GET", "/api?action=reload", nil, 200)
	r.must("POST", "/dhcp/other", nil, 404)
	r.must("GET", "/api?action=remove-net&iface=sub0", nil, 200)
}
