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

// TestLabDHCPv6PDAndDNS drives the DHCPv6, prefix delegation, DNS and
// option 82 endpoints of routerd --lab over HTTP, REST and action forms.
func TestLabDHCPv6PDAndDNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	r := startLab(t, binary(t), uniquePrefix(), t.TempDir())

	pd := r.must("GET", "/pd", nil, 200)
	c := pd["capacity"].(map[string]any)
	if pd["pool"] != "2001:db8:7700::/40" || pd["prefix_len"].(float64) != 56 || c["prefixes_total"].(float64) != 65536 ||
		c["prefixes_used"].(float64) != 256 || pd["per_vlan"].(map[string]any)["sub0"] == nil {
		t.Errorf("GET /pd: %v", pd)
	}
	r.must("GET", "/api?action=pd-list", nil, 200)
	r.must("POST", "/pd", map[string]any{"iface": "sub0", "size": 3}, 400)
	r.must("POST", "/pd/resize", map[string]any{"iface": "sub0", "size": 256}, 409)
	if m := r.must("POST", "/pd", map[string]any{"iface": "sub0", "size": 512}, 201); m["replaced"] == nil || m["warning"] == nil {
		t.Errorf("POST /pd with a new size: %v", m)
	}
	if m := r.must("GET", "/pd/sync?dry=1", nil, 200); m["dry_run"] != true {
		t.Errorf("GET /pd/sync: %v", m)
	}
	r.must("GET", "/api?action=pd-sync&dry=1", nil, 200)
	r.must("POST", "/pd/assign", map[string]any{"mac": "02:00:00:00:00:99"}, 404)
	r.must("DELETE", "/pd", map[string]any{"iface": "sub0"}, 200)
	r.must("DELETE", "/pd", map[string]any{"iface": "sub0"}, 404)

	if m := r.must("GET", "/net6/lease?valid=100", nil, 400); m["field"] != "valid" {
		t.Errorf("valid 100: %v", m)
	}
	if m := r.must("POST", "/net6/lease", map[string]any{"valid": 7200}, 200); len(m["changed"].([]any)) == 0 {
		t.Errorf("POST /net6/lease: %v", m)
	}
	r.must("POST", "/net6", map[string]any{"iface": "sub0"}, 201)
	r.must("GET", "/api?action=net6-pool&iface=sub0&start=2001:db8:77::2000&end=2001:db8:77::2fff", nil, 200)
	r.must("GET", "/api?action=net6-dns&servers=2001:db8:77::53", nil, 200)

	if m := r.must("POST", "/dns", map[string]any{"v4": "9.9.9.9, 149.112.112.112", "domain": "isp.example"}, 200); m["status"] == nil {
		t.Errorf("POST /dns: %v", m)
	}
	r.must("POST", "/dns/sub0", map[string]any{"v6": []string{"2001:db8:77::54"}}, 200)
	d := r.must("GET", "/dns", nil, 200)
	if len(d["effective"].([]any)) != 1 || d["per_vlan"].(map[string]any)["ipv6"].(map[string]any)["2001:db8:77::/64"] == nil {
		t.Errorf("GET /dns: %v", d)
	}
	r.must("DELETE", "/dns/sub0", nil, 200)
	r.must("DELETE", "/dns/sub0", nil, 404)
	r.must("DELETE", "/dns", map[string]any{"global": "v4"}, 200)
	r.must("DELETE", "/dns", map[string]any{"global": "v4"}, 404)
	r.must("DELETE", "/dns", map[string]any{"global": "v5"}, 400)
	r.must("GET", "/api?action=dns-list", nil, 200)

	r.must("POST", "/option82", map[string]any{"enable": true}, 200)
	if m := r.must("GET", "/option82", nil, 200); m["capture_enabled"] != true {
		t.Errorf("GET /option82: %v", m)
	}
	r.must("GET", "/api?action=option82", nil, 200)
	if m := r.must("DELETE", "/net6", map[string]any{"iface": "sub0"}, 200); m["radvd"] == nil {
		t.Errorf("DELETE /net6: %v", m)
	}
}
