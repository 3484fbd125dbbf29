package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestFullKernelLabQinQ runs routerd --lab on a full kernel (the VM tier:
// make vm) and drives the VLAN operations over HTTP: an S-VLAN on the
// lab's subscriber port and a C-VLAN inside it with an address, served by
// DHCP; a real client behind the same two tags in the subscriber namespace
// gets a lease; disable, enable and delete follow the state table, and
// `ip -d link` shows the 802.1ad outer and 802.1Q inner tags.
func TestFullKernelLabQinQ(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	prefix, state := uniquePrefix(), t.TempDir()
	r := startLab(t, binary(t), prefix, state)
	st, m := r.call("POST", "/vlans", map[string]any{"parent": "sub0", "vlan_id": 200, "protocol": "802.1ad", "serve": false})
	if st == 500 && strings.Contains(m["error"].(string), "802.1Q") {
		t.Skip("this kernel has no 802.1Q/802.1ad: the VM tier (make vm) runs this test")
	}
	if st != 201 || m["name"] != "svlan200" {
		t.Fatalf("S-VLAN: %d %v", st, m)
	}
	m = r.must("POST", "/vlans", map[string]any{"parent": "svlan200", "vlan_id": 116, "ip": "10.116.0.0/24", "ipv6": "2001:db8:116::1/64", "label": "pon 0/1/0"}, 201)
	t.Logf("C-VLAN answer: %v", m)
	if m["name"] != "svlan200.116" || m["ip"] != "10.116.0.1/24" {
		t.Errorf("C-VLAN: %v", m)
	}
	if served, _ := m["served"].(map[string]any); served == nil || served["net"].(map[string]any)["network"] != "10.116.0.0/24" {
		t.Errorf("C-VLAN not served by DHCPv4: %v", m)
	}
	link := r.inRouter("ip", "-d", "link", "show", "svlan200.116")
	outer := r.inRouter("ip", "-d", "link", "show", "svlan200")
	if !strings.Contains(outer, "vlan protocol 802.1ad id 200") || !strings.Contains(link, "vlan protocol 802.1Q id 116") {
		t.Errorf("tags:\n%s\n%s", outer, link)
	}

	// A subscriber behind the same tags: 802.1ad 200, 802.1Q 116 on the
	// subscriber namespace's end of the lab link.
	sub := func(args ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", prefix + "-sub"}, args...)...).CombinedOutput()
		return string(out), err
	}
	qinq := func() {
		t.Helper()
		for _, c := range [][]string{
			{"ip", "link", "add", "link", "eth0", "name", "s200", "type", "vlan", "proto", "802.1ad", "id", "200"},
			{"ip", "link", "add", "link", "s200", "name", "c116", "type", "vlan", "id", "116"},
			{"ip", "link", "set", "s200", "up"},
			{"ip", "link", "set", "c116", "up"},
		} {
			if out, err := sub(c...); err != nil {
				t.Fatalf("%v: %v\n%s", c, err, out)
			}
		}
	}
	qinq()
	if _, err := exec.LookPath("udhcpc"); err == nil {
		var out string
		eventually(t, 60*time.Second, func() error {
			o, err := sub("udhcpc", "-i", "c116", "-n", "-q", "-f", "-t", "3", "-T", "2", "-s", "/bin/true")
			out = o
			if err != nil || !regexp.MustCompile(`lease of 10\.116\.0\.\d+ obtained from 10\.116\.0\.1`).MatchString(o) {
				return errors.New("no lease on the QinQ link yet")
			}
			return nil
		})
		t.Logf("udhcpc on QinQ: %s", strings.TrimSpace(out))
	}

	// kill -9, then start again on the same state: the lab is rebuilt
	// empty (as after a reboot) and netcfg brings every VLAN and address
	// back from etcd, nothing duplicated.
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait() // sets ProcessState: the cleanup knows it is gone
	r = startLab(t, binary(t), prefix, state)
	m = r.must("GET", "/vlans", nil, 200)
	if m["count"].(float64) != 2 {
		t.Errorf("VLANs after kill -9 and restart: %v", m)
	}
	eventually(t, 30*time.Second, func() error {
		links := r.inRouter("ip", "-d", "-o", "link", "show")
		if strings.Count(links, "vlan protocol 802.1ad id 200") != 1 || strings.Count(links, "vlan protocol 802.1Q id 116") != 1 {
			return fmt.Errorf("links after restart:\n%s", links)
		}
		if addr := r.inRouter("ip", "-o", "addr", "show", "dev", "svlan200.116"); strings.Count(addr, "10.116.0.1/24") != 1 {
			return fmt.Errorf("address after restart:\n%s", addr)
		}
		return nil
	})

	// Disable: the S-VLAN is refused while the C-VLAN on it is enabled.
	r.must("POST", "/vlans/disable", map[string]any{"name": "svlan200"}, 409)
	m = r.must("POST", "/vlans/disable", map[string]any{"name": "svlan200.116", "reason": "maintenance"}, 200)
	if m["enabled"] != false || m["reason"] != "maintenance" {
		t.Errorf("disable: %v", m)
	}
	if got := fmt.Sprint(m["took_offline"]); got != "[DHCPv4 DHCPv6 router advertisements link]" {
		t.Errorf("disable took_offline %s, want DHCPv4, DHCPv6, advertisements and the link: %v", got, m)
	}
	if out := r.inRouter("ip", "link", "show", "svlan200.116"); !strings.Contains(out, "state DOWN") {
		t.Errorf("disabled link not down:\n%s", out)
	}
	// dhcp reports the VLAN not served while it is disabled: its subnet
	// configured, out of the listen list.
	served := func() map[string]any {
		for _, i := range r.must("GET", "/interfaces", nil, 200)["interfaces"].([]any) {
			if i := i.(map[string]any); i["iface"] == "svlan200.116" {
				return i
			}
		}
		return nil
	}
	if i := served(); i == nil || i["in_dhcp_conf"] != true || i["dhcp_active"] != false || i["in_dhcp_listen"] != false || i["suspended"] == nil {
		t.Errorf("GET /interfaces for the disabled VLAN: %v", i)
	}
	m = r.must("GET", "/api?action=vlan-enable&name=svlan200.116", nil, 200)
	if got := fmt.Sprint(m["restored"]); !strings.Contains(got, "DHCPv4 DHCPv6 router advertisements") {
		t.Errorf("enable restored %s: %v", got, m)
	}
	if i := served(); i == nil || i["dhcp_active"] != true || i["suspended"] != nil {
		t.Errorf("GET /interfaces for the enabled VLAN: %v", i)
	}
	if _, err := exec.LookPath("udhcpc"); err == nil {
		if _, err := sub("ip", "link", "show", "c116"); err != nil {
			qinq() // the restart rebuilt the lab's namespaces
		}
		eventually(t, 60*time.Second, func() error {
			if o, err := sub("udhcpc", "-i", "c116", "-n", "-q", "-f", "-t", "3", "-T", "2", "-s", "/bin/true"); err != nil || !strings.Contains(o, "obtained from 10.116.0.1") {
				return errors.New("no lease on the QinQ link after the enable")
			}
			return nil
		})
	}
	r.must("DELETE", "/vlans", map[string]any{"name": "svlan200"}, 409)
	r.must("DELETE", "/vlans", map[string]any{"name": "svlan200.116"}, 200)
	r.must("DELETE", "/vlans", map[string]any{"name": "svlan200"}, 200)
	if out := r.inRouter("ip", "-o", "link", "show"); strings.Contains(out, "svlan") {
		t.Errorf("links left:\n%s", out)
	}
}

// TestLabAddresses drives addresses and GET /iface over HTTP on any kernel:
// an address corrected to the first host, the 409 for a subnet on another
// interface, the served subnet named when its address goes, 400 for other
// methods on /ip; on a kernel without VLANs, POST /vlans is a 500 carrying
// the kernel's refusal.
func TestLabAddresses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	r := startLab(t, binary(t), uniquePrefix(), t.TempDir())
	m := r.must("POST", "/ip", map[string]any{"iface": "sub0", "ip": "10.78.0.0/24"}, 201)
	if m["assigned"] != "10.78.0.1/24" || m["note"] == nil {
		t.Errorf("corrected address: %v", m)
	}
	if out := r.inRouter("ip", "-4", "addr", "show", "dev", "sub0"); !strings.Contains(out, "10.78.0.1/24") {
		t.Errorf("address not live:\n%s", out)
	}
	r.must("POST", "/ip", map[string]any{"iface": "up0", "ip": "10.78.0.9/24"}, 409)
	r.must("GET", "/ip", nil, 400)
	m = r.must("GET", "/iface", nil, 200)
	found := false
	for _, i := range m["interfaces"].([]any) {
		if i := i.(map[string]any); i["name"] == "sub0" {
			found = strings.Contains(strings.Join(toStrings(i["ips"]), ","), "10.78.0.1/24")
		}
	}
	if !found {
		t.Errorf("GET /iface does not show sub0 with 10.78.0.1/24: %v", m)
	}
	r.must("DELETE", "/ip", map[string]any{"iface": "sub0", "ip": "10.78.0.1/24"}, 200)
	// The lab's served subnet loses its only address: named, not removed.
	r.must("POST", "/ip", map[string]any{"iface": "sub0", "ip": "10.77.0.1/24"}, 201) // already live: persisted
	m = r.must("DELETE", "/ip", map[string]any{"iface": "sub0", "ip": "10.77.0.1/24"}, 200)
	if u, _ := m["unused_subnet"].(map[string]any); u == nil || u["block"] != "10.77.0.0/24" || m["warning"] == nil {
		t.Errorf("served subnet not named on delete: %v", m)
	}
	if st, m := r.call("POST", "/vlans", map[string]any{"parent": "up0", "vlan_id": 300}); st != 201 {
		if st != 500 || !strings.Contains(fmt.Sprint(m["error"]), "802.1Q") || m["detail"] == nil {
			t.Errorf("POST /vlans on a kernel without VLANs: %d %v", st, m)
		}
		r.must("GET", "/vlans", nil, 200)
	}
}

func toStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		out = append(out, fmt.Sprint(x))
	}
	return out
}
