package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLabSNMP: the SNMP agent is set through the gateway and answers
// net-snmp's clients inside the lab's router namespace on UDP 161, IPv4
// and IPv6, with the system group and a registered client's row.
func TestLabSNMP(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	if _, err := exec.LookPath("snmpget"); err != nil {
		t.Skip("snmpget not installed (Debian package snmp)")
	}
	prefix := uniquePrefix()
	r := startLab(t, binary(t), prefix, t.TempDir())
	snmp := func(cmd, community, target string, args ...string) (string, error) {
		full := append([]string{"netns", "exec", prefix + "-router", cmd, "-v2c", "-c", community, "-t", "1", "-r", "1", "-On", "-m", "", target}, args...)
		out, err := exec.Command("ip", full...).CombinedOutput()
		return string(out), err
	}

	if m := r.must("GET", "/snmp", nil, 200); m["enabled"] != "no" || m["running"] != false {
		t.Fatalf("before any setting: %v", m)
	}
	if _, err := snmp("snmpget", "public", "udp:127.0.0.1:161", "1.3.6.1.2.1.1.6.0"); err == nil {
		t.Fatal("the agent answers without a community set (a default community)")
	}
	// A client registered before the agent starts is in its first table;
	// with a plan it is shaped, and the shaper gives its counters.
	r.must("POST", "/plans", map[string]any{"name": "snmp-plan", "down_mbps": 50, "up_mbps": 10}, 201)
	r.must("POST", "/clients", map[string]any{"mac": "02:00:00:00:5e:01", "ip": "10.77.0.61", "hostname": "snmp-cpe", "plan": "snmp-plan"}, 201)

	if m := r.must("POST", "/snmp", map[string]any{"community": "bad community"}, 400); m["field"] != "community" {
		t.Fatalf("bad community: %v", m)
	}
	const community = "e2e-ro"
	r.must("POST", "/snmp", map[string]any{"community": community, "location": "Lab rack 1", "contact": "noc@example.net"}, 200)
	m := r.must("GET", "/api?action=snmp-status", nil, 200)
	if m["running"] != true || m["enabled"] != "yes" || m["community_set"] != true || m["listen"] != "udp:161, udp6:161" {
		t.Fatalf("GET /snmp: %v", m)
	}
	for k, v := range m {
		if s, ok := v.(string); ok && strings.Contains(s, community) {
			t.Fatalf("GET /snmp shows the community in %s", k)
		}
	}

	for _, target := range []string{"udp:127.0.0.1:161", "udp6:[::1]:161"} {
		out, err := snmp("snmpget", community, target, "1.3.6.1.2.1.1.6.0", "1.3.6.1.2.1.1.4.0")
		if err != nil || !strings.Contains(out, `"Lab rack 1"`) || !strings.Contains(out, "noc@example.net") {
			t.Fatalf("snmpget %s: %v\n%s", target, err, out)
		}
	}
	// The client's row: index 2.0.0.0.94.1 (its MAC); columns 2 IP, 3
	// hostname, 4 plan, 5 bytes to the client (from the shaper). The
	// table is read when the agent starts and every 30 s after, so a
	// shaper slower than the first read shows at the next.
	eventually(t, 45*time.Second, func() error {
		out, err := snmp("snmpget", community, "udp:127.0.0.1:161", "1.3.6.1.4.1.32473.2.2.1.3.2.0.0.0.94.1", "1.3.6.1.4.1.32473.2.2.1.2.2.0.0.0.94.1",
			"1.3.6.1.4.1.32473.2.2.1.4.2.0.0.0.94.1", "1.3.6.1.4.1.32473.2.2.1.5.2.0.0.0.94.1")
		if err != nil || !strings.Contains(out, `"snmp-cpe"`) || !strings.Contains(out, "IpAddress: 10.77.0.61") || !strings.Contains(out, `"snmp-plan"`) || !strings.Contains(out, "Counter64: ") {
			return &snmpErr{out, err}
		}
		return nil
	})
	if m := r.must("GET", "/snmp", nil, 200); m["per_client_count"] != float64(1) || !strings.HasPrefix(m["counters"].(string), "shaper") {
		t.Errorf("GET /snmp after the refresh: %v", m)
	}
	// The lab's interfaces in IF-MIB.
	if out, err := snmp("snmpwalk", community, "udp:127.0.0.1:161", "1.3.6.1.2.1.31.1.1.1.1"); err != nil || !strings.Contains(out, `"sub0"`) {
		t.Fatalf("ifName walk: %v\n%s", err, out)
	}
}

type snmpErr struct {
	out string
	err error
}

func (e *snmpErr) Error() string {
	if e.err != nil {
		return e.err.Error() + ": " + e.out
	}
	return e.out
}
