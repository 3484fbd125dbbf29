package network

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/proto/api"
)

func change(t *testing.T, s string) *api.NetworkChange {
	t.Helper()
	var c api.NetworkChange
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

var facts = Facts{
	Links: map[string]string{"eth0": "port", "eth1": "port", "eth2": "port", "eth3": "port", "lo": "loopback", "vlan7": "vlan", "usb0": "bmc"},
	Addrs: map[string][]string{"eth0": {"192.0.2.1/24"}},
	VLANs: map[string][]string{"eth3": {"vlan7"}},
}

var base = Config{Ports: []api.NetPort{{Name: "eth0", Up: true}, {Name: "eth1", Up: true}, {Name: "eth2", Up: true}, {Name: "eth3", Up: true}}}

// Every field rule of Document 1 for ports and bonds, each broken one
// named by its field.
func TestMergeRules(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		field    string // "" = valid
	}{
		{"mtu low", `{"ports":{"eth1":{"mtu":575}}}`, "ports.eth1.mtu"},
		{"mtu high", `{"ports":{"eth1":{"mtu":9217}}}`, "ports.eth1.mtu"},
		{"mtu fraction", `{"ports":{"eth1":{"mtu":1500.5}}}`, "ports.eth1.mtu"},
		{"mtu edge", `{"ports":{"eth1":{"mtu":9216}}}`, ""},
		{"mtu null", `{"ports":{"eth1":{"mtu":null}}}`, ""},
		{"unknown port", `{"ports":{"eth9":{"up":true}}}`, "ports.eth9"},
		{"loopback is no port", `{"ports":{"lo":{"up":true}}}`, "ports.lo"},
		{"bmc is no port", `{"ports":{"usb0":{"up":true}}}`, "ports.usb0"},
		{"remove with addresses", `{"ports":{"eth0":{"remove":true}}}`, "ports.eth0.remove"},
		{"remove with VLANs", `{"ports":{"eth3":{"remove":true}}}`, "ports.eth3.remove"},
		{"remove", `{"ports":{"eth2":{"remove":true}}}`, ""},
		{"bond without mode", `{"bonds":{"bond0":{"members":["eth1"]}}}`, "bonds.bond0.mode"},
		{"bond without members", `{"bonds":{"bond0":{"mode":"802.3ad"}}}`, "bonds.bond0.members"},
		{"bond mode", `{"bonds":{"bond0":{"members":["eth1"],"mode":"lacp"}}}`, "bonds.bond0.mode"},
		{"member not configured", `{"bonds":{"bond0":{"members":["eth9"],"mode":"802.3ad"}}}`, "bonds.bond0.members"},
		{"member with addresses", `{"bonds":{"bond0":{"members":["eth0"],"mode":"802.3ad"}}}`, "bonds.bond0.members"},
		{"member with VLANs", `{"bonds":{"bond0":{"members":["eth3"],"mode":"802.3ad"}}}`, "bonds.bond0.members"},
		{"member twice", `{"bonds":{"bond0":{"members":["eth1","eth1"],"mode":"802.3ad"}}}`, "bonds.bond0.members"},
		{"member of two bonds", `{"bonds":{"bond0":{"members":["eth1"],"mode":"802.3ad"},"bond1":{"members":["eth1"],"mode":"802.3ad"}}}`, "bonds.bond1.members"},
		{"lacp-rate outside 802.3ad", `{"bonds":{"bond0":{"members":["eth1"],"mode":"active-backup","params":{"lacp-rate":"fast"}}}}`, "bonds.bond0.params.lacp-rate"},
		{"lacp-rate value", `{"bonds":{"bond0":{"members":["eth1"],"mode":"802.3ad","params":{"lacp-rate":"quick"}}}}`, "bonds.bond0.params.lacp-rate"},
		{"hash policy", `{"bonds":{"bond0":{"members":["eth1"],"mode":"802.3ad","params":{"transmit-hash-policy":"layer9"}}}}`, "bonds.bond0.params.transmit-hash-policy"},
		{"miimon range", `{"bonds":{"bond0":{"members":["eth1"],"mode":"802.3ad","params":{"mii-monitor-interval":10001}}}}`, "bonds.bond0.params.mii-monitor-interval"},
		{"unknown param", `{"bonds":{"bond0":{"members":["eth1"],"mode":"802.3ad","params":{"updelay":5}}}}`, "bonds.bond0.params.updelay"},
		{"bond over a port name", `{"bonds":{"eth2":{"members":["eth1"],"mode":"802.3ad"}}}`, "bonds.eth2"},
		{"bond valid", `{"bonds":{"bond0":{"members":["eth1","eth2"],"mode":"802.3ad","params":{"lacp-rate":"fast","transmit-hash-policy":"layer3+4","mii-monitor-interval":100}}}}`, ""},
		{"remove unknown bond", `{"bonds":{"bond0":{"remove":true}}}`, "bonds.bond0.remove"},
	} {
		_, _, probs := Merge(base, change(t, tc.in), facts)
		switch {
		case tc.field == "" && len(probs) > 0:
			t.Errorf("%s: problems %v", tc.name, probs)
		case tc.field != "" && (len(probs) == 0 || probs[0].Field != tc.field):
			t.Errorf("%s: problems %v, want field %s", tc.name, probs, tc.field)
		}
	}
}

// A bond is created, its parameters changed and reset, its mode
// changed; the version follows the document and not the order of its
// lists.
func TestMergeBondLife(t *testing.T) {
	c1, ch, probs := Merge(base, change(t, `{"bonds":{"bond0":{"members":["eth1","eth2"],"mode":"802.3ad","params":{"lacp-rate":"fast","mii-monitor-interval":"100"}}}}`), facts)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	want := []string{"bond bond0: created", "bond bond0: mode 802.3ad", "bond bond0: members none -> eth1,eth2", "bond bond0: lacp-rate fast", "bond bond0: mii-monitor-interval 100"}
	if d := cmp.Diff(want, ch); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	c2, ch, probs := Merge(c1, change(t, `{"bonds":{"bond0":{"mode":"active-backup","params":{"lacp-rate":null}}}}`), facts)
	if len(probs) > 0 || len(c2.Bonds) != 1 || c2.Bonds[0].Mode != "active-backup" || c2.Bonds[0].Params["lacp-rate"] != nil {
		t.Fatalf("mode change: %v %v %+v", ch, probs, c2)
	}
	// Round trip through JSON (etcd) keeps the version.
	raw, _ := json.Marshal(c1)
	var back Config
	_ = json.Unmarshal(raw, &back)
	if Version(back) != Version(c1) || Version(c1) == Version(base) {
		t.Errorf("versions: %s %s %s", Version(back), Version(c1), Version(base))
	}
	rev := Config{Ports: []api.NetPort{base.Ports[3], base.Ports[2], base.Ports[1], base.Ports[0]}}
	if Version(rev) != Version(base) {
		t.Error("the version depends on the order of the ports")
	}
	if r := Report(base, c1); !strings.Contains(r, `+       "mode": "802.3ad"`) && !strings.Contains(r, "+ ") {
		t.Errorf("report:\n%s", r)
	}
}

// The rendered files are what systemd-networkd reads, and Check refuses
// what it would not.
func TestRenderAndCheck(t *testing.T) {
	c, _, _ := Merge(base, change(t, `{"ports":{"eth0":{"mtu":9000}},"bonds":{"bond0":{"members":["eth1","eth2"],"mode":"802.3ad","params":{"lacp-rate":"fast","transmit-hash-policy":"layer3+4","mii-monitor-interval":100}}}}`), facts)
	fs := Render(c, Version(c), map[string][]string{"eth0": {"192.0.2.1/24"}, "bond0": {"198.51.100.1/24"}, "vlan7": {"10.7.0.1/24"}}, []VLANLink{{Name: "vlan7", Parent: "bond0", Protocol: "802.1Q", ID: 7, Up: true}, {Name: "svlan200", Parent: "eth3", Protocol: "802.1ad", ID: 200, Up: false}})
	if err := Check(fs); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"10-routerd-bond0.netdev":     {"[NetDev]\nName=bond0\nKind=bond", "[Bond]\nMode=802.3ad\nLACPTransmitRate=fast\nTransmitHashPolicy=layer3+4\nMIIMonitorSec=100ms"},
		"10-routerd-bond0.network":    {"Name=bond0", "Address=198.51.100.1/24"},
		"10-routerd-eth1.network":     {"Name=eth1", "Bond=bond0"},
		"10-routerd-eth0.network":     {"MTUBytes=9000", "ActivationPolicy=up", "Address=192.0.2.1/24"},
		"10-routerd-vlan7.netdev":     {"Kind=vlan", "[VLAN]\nId=7\n"},
		"10-routerd-vlan7.network":    {"Name=vlan7", "Address=10.7.0.1/24"},
		"10-routerd-svlan200.netdev":  {"Id=200", "Protocol=802.1ad"},
		"10-routerd-svlan200.network": {"ActivationPolicy=down"},
		"10-routerd-eth3.network":     {"VLAN=svlan200"},
	} {
		for _, w := range want {
			if !strings.Contains(fs[name], w) {
				t.Errorf("%s lacks %q:\n%s", name, w, fs[name])
			}
		}
	}
	if !strings.Contains(fs["10-routerd-bond0.network"], "VLAN=vlan7") {
		t.Errorf("bond0 does not carry vlan7:\n%s", fs["10-routerd-bond0.network"])
	}
	if strings.Contains(fs["10-routerd-eth1.network"], "MTUBytes") {
		t.Error("a bond member carries its own MTU")
	}
	for what, broken := range map[string]Files{
		"unknown key":  {"10-routerd-x.network": "[Match]\nName=x\nFoo=bar\n"},
		"no name":      {"10-routerd-x.network": "[Network]\nAddress=192.0.2.1/24\n"},
		"dangling":     {"10-routerd-x.network": "[Match]\nName=x\n[Network]\nBond=bond9\n"},
		"two matches":  {"10-routerd-x.network": "[Match]\nName=x\n", "10-routerd-y.network": "[Match]\nName=x\n"},
		"foreign name": {"90-operator.network": "[Match]\nName=x\n"},
		"bad mode":     {"10-routerd-b.netdev": "[NetDev]\nName=b\nKind=bond\n[Bond]\nMode=fast\n"},
		"VLAN nowhere": {"10-routerd-x.network": "[Match]\nName=x\n[Network]\nVLAN=vlan9\n"},
		"VLAN id":      {"10-routerd-v.netdev": "[NetDev]\nName=v\nKind=vlan\n[VLAN]\nId=x\n"},
	} {
		if Check(broken) == nil {
			t.Errorf("%s: Check accepted it", what)
		}
	}
}

// The lock-out guard names what it protects: an SSH session's local
// address, the API's (not 0.0.0.0) and the caller's local.
func TestGuard(t *testing.T) {
	what := func(i string) string { return "taking " + i + " down" }
	gone := map[string][]string{"eth0": {"192.0.2.1/24", "2001:db8::1/64"}, "eth1": {"198.51.100.1/24"}}
	if r := (Guard{API: netip.MustParseAddr("0.0.0.0")}).Refusals(gone, what); len(r) != 0 {
		t.Errorf("an empty guard refused: %v", r)
	}
	g := Guard{SSH: []Session{{Local: netip.MustParseAddr("2001:db8::1"), Remote: netip.MustParseAddrPort("[2001:db8::9]:50000")}},
		API: netip.MustParseAddr("198.51.100.1"), Caller: netip.MustParseAddr("192.0.2.1")}
	r := g.Refusals(gone, what)
	if len(r) != 3 {
		t.Fatalf("refusals: %v", r)
	}
	for _, w := range []string{"address you are connected to", "SSH session from [2001:db8::9]:50000", "the API listens on"} {
		if !strings.Contains(strings.Join(r, "\n"), w) {
			t.Errorf("no refusal mentions %q: %v", w, r)
		}
	}
	for _, x := range r {
		if !strings.HasPrefix(x, "refused: taking eth") {
			t.Errorf("refusal %q", x)
		}
	}
	if g.Protected(netip.MustParseAddr("203.0.113.1")) != "" || g.Protected(netip.MustParseAddr("::ffff:192.0.2.1")) == "" {
		t.Error("Protected")
	}
}
