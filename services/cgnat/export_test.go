package cgnat_test

import (
	"context"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestConfigDocument: etc/cgnat.json exported, a refused document changing
// nothing, and an import replacing pools and forwards in etcd and kernel.
func TestConfigDocument(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	r := newRig(t, ns)
	ctx := context.Background()
	r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": true, "iface": "up0", "pool": "203.0.113.1-203.0.113.2", "exempt": "10.99.0.0/16"})
	r.want(t, 201, "POST", "/nat", map[string]any{"iface": "up0", "pool_start": "198.51.100.1"})
	r.want(t, 201, "POST", "/pf", map[string]any{"public_port": 8080, "client_ip": "10.77.0.5", "client_port": 80})
	docs, err := bus.Invoke(ctx, r.env.NC, api.CGNATConfig.Export, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	text := docs.Documents["etc/cgnat.json"]
	if !has(text, `"pool": "203.0.113.1-203.0.113.2"`, `"pool_start": "198.51.100.1"`, `"client_ip": "10.77.0.5"`, `"10.99.0.0/16"`) {
		t.Fatalf("export:\n%s", text)
	}
	// A broken document: 400, nothing changes.
	_, err = bus.Invoke(ctx, r.env.NC, api.CGNATConfig.Import, &api.ConfigDocuments{Documents: map[string]string{
		"etc/cgnat.json": strings.Replace(text, `"client_port": 80`, `"client_port": 0`, 1)}})
	if apierr.From(err).Kind != apierr.KindInvalid {
		t.Fatalf("bad document: %v", err)
	}
	if m := r.want(t, 200, "GET", "/pf", nil); m["count"].(float64) != 1 {
		t.Fatalf("a refused import changed the forwards: %v", m)
	}
	// Another router's document: replaces pools and forwards.
	other := strings.NewReplacer(`"client_ip": "10.77.0.5"`, `"client_ip": "10.77.0.6"`, `"pool_start": "198.51.100.1"`, `"pool_start": "198.51.100.9"`,
		`"pool_end": "198.51.100.1"`, `"pool_end": "198.51.100.9"`).Replace(text)
	imp, err := bus.Invoke(ctx, r.env.NC, api.CGNATConfig.Import, &api.ConfigDocuments{Documents: map[string]string{"etc/cgnat.json": other}})
	if err != nil || len(imp.Documents) != 1 {
		t.Fatalf("import: %+v %v", imp, err)
	}
	out := testenv.Run(t, ns, "nft", "list", "table", "ip", "routerd_cgnat")
	if !has(out, "dnat to 10.77.0.6:80", "snat to 198.51.100.9", `comment "cgnat tcp up0"`) || strings.Contains(out, "10.77.0.5") || strings.Contains(out, "198.51.100.1 ") {
		t.Fatalf("after import:\n%s", out)
	}
	again, _ := bus.Invoke(ctx, r.env.NC, api.CGNATConfig.Export, &api.None{})
	if again.Documents["etc/cgnat.json"] != other {
		t.Fatalf("export after import differs:\n%s\nwant\n%s", again.Documents["etc/cgnat.json"], other)
	}
}
