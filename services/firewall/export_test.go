package firewall_test

import (
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/services/firewall"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/testenv"
)

// etc/firewall.json: exported, imported whole (the allow-list replaced in
// the kernel too), refused whole when an entry is invalid.
func TestConfigDocument(t *testing.T) {
	ns := testenv.Netns(t)
	env := testenv.Start(t)
	start(t, env, ns, firewall.Deps{APIPort: 8880})
	call(t, env, api.ProtectAddOp, "POST", map[string]any{"network": "192.0.2.0/24", "comment": "noc"})
	call(t, env, api.AntispoofSetOp, "POST", map[string]any{"mode": "dynamic", "exempt": "198.51.100.0/24"})
	docs, err := invoke(t, env, api.FirewallConfig.Export, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	doc := docs.Documents[firewall.Document]
	for _, w := range []string{`"network": "192.0.2.0/24"`, `"comment": "noc"`, `"mode": "dynamic"`, `"198.51.100.0/24"`} {
		if !strings.Contains(doc, w) {
			t.Errorf("export lacks %s:\n%s", w, doc)
		}
	}
	other := `{"protect": [{"network": "203.0.113.9", "comment": "vpn", "added": "2026-11-24 10:00:00"}],
		"antispoof": {"enabled": false, "mode": "strict", "log": true, "exempt": [], "overrides": {"vlan7": "off"}}}`
	if _, err := invoke(t, env, api.FirewallConfig.Import, &api.ConfigDocuments{Documents: map[string]string{firewall.Document: other}}); err != nil {
		t.Fatal(err)
	}
	out := nftList(t, ns)
	if !strings.Contains(out, `203.0.113.9 comment "vpn"`) || strings.Contains(out, "192.0.2.0/24") {
		t.Errorf("kernel after import:\n%s", out)
	}
	st, _ := invoke(t, env, api.AntispoofGet, &api.None{})
	if st.Mode != "strict" || !st.Log || st.Overrides["vlan7"] != "off" {
		t.Errorf("antispoof after import: %+v", st)
	}
	bad := strings.Replace(other, "203.0.113.9", "2001:db8::1", 1)
	_, err = invoke(t, env, api.FirewallConfig.Import, &api.ConfigDocuments{Documents: map[string]string{firewall.Document: bad}})
	if e := apierr.From(err); e == nil || e.Kind != apierr.KindInvalid {
		t.Errorf("bad document: %v", err)
	}
	if l, _ := invoke(t, env, api.ProtectGet, &api.None{}); l.Count != 1 || l.Networks[0].Network != "203.0.113.9/32" {
		t.Errorf("a refused import changed the list: %+v", l)
	}
	again, _ := invoke(t, env, api.FirewallConfig.Export, &api.None{})
	if !strings.Contains(again.Documents[firewall.Document], "203.0.113.9/32") {
		t.Errorf("export after import:\n%s", again.Documents[firewall.Document])
	}
}
