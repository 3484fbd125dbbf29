package firewall_test

import (
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/services/firewall"
	"routerd.dev/shared/testenv"
)

// GET /firewall/full lists every forward-hook chain verbosely, ours and
// the operator's, one line per string; GET /firewall checks its filter.
func TestFirewallViews(t *testing.T) {
	ns := testenv.Netns(t)
	env := testenv.Start(t)
	testenv.Run(t, ns, "nft", "add", "table", "ip", "operator")
	testenv.Run(t, ns, "nft", "add", "chain", "ip", "operator", "opfw", "{ type filter hook forward priority 0; }")
	testenv.Run(t, ns, "nft", "add", "rule", "ip", "operator", "opfw", "ip saddr 198.51.100.9 counter accept")
	start(t, env, ns, firewall.Deps{})
	full, err := invoke(t, env, api.FirewallFullGet, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(full.ForwardChain, "\n")
	for _, want := range []string{"table inet routerd_firewall", "ip saddr @block4 counter packets 0 bytes 0 drop # handle", "table ip operator", "ip saddr 198.51.100.9 counter packets 0 bytes 0 accept # handle"} {
		if !strings.Contains(text, want) {
			t.Errorf("forward_chain lacks %q:\n%s", want, text)
		}
	}
	for _, l := range full.ForwardChain {
		if strings.Contains(l, "\n") || strings.TrimSpace(l) == "" {
			t.Errorf("line %q", l)
		}
	}
	if st, m := call(t, env, api.FirewallGet, "GET", map[string]any{"network": "nonsense"}); st != 400 || m["field"] != "network" {
		t.Errorf("GET /firewall?network=nonsense: %d %v", st, m)
	}
	if st, m := call(t, env, api.FirewallGet, "GET", nil); st != 200 || m["count"] != 0.0 {
		t.Errorf("GET /firewall: %d %v", st, m)
	}
	// The operator's table is untouched by our start.
	if out := testenv.Run(t, ns, "nft", "list", "table", "ip", "operator"); !strings.Contains(out, "198.51.100.9") {
		t.Errorf("operator's table changed:\n%s", out)
	}
}
