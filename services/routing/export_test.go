package routing_test

import (
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/testenv"
)

// TestExportImport: the settings go out as etc/routing.json (the peer's
// password sealed, never in clear) and come back whole through import,
// which also drops a change waiting for confirm; a document that does not
// parse or has problems is a 400 and changes nothing.
func TestExportImport(t *testing.T) {
	needBird(t)
	ns := testenv.Netns(t)
	env := testenv.Start(t)
	start(t, env, ns, t.TempDir(), time.Minute)

	call(t, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up1", "ip": "198.18.0.1", "asn": 65000, "password": "s3cret-md5"}, 200)
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "185.10.0.0/22"}, 200)
	call(t, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)
	docs := call(t, env, api.RoutingConfig.Export, nil, 200)["documents"].(map[string]any)
	text, _ := docs["etc/routing.json"].(string)
	if !strings.Contains(text, `"asn": 65010`) || !strings.Contains(text, "185.10.0.0/22") || !strings.Contains(text, "password_sealed") || strings.Contains(text, "s3cret") {
		t.Fatalf("etc/routing.json:\n%s", text)
	}

	// Changed since: a second peer, waiting for confirm.
	call(t, env, api.BGPAnnDelOp, map[string]any{"prefix": "185.10.0.0/22"}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up2", "ip": "198.18.0.5", "asn": 65005}, 200)
	if v := call(t, env, api.BGPGet, nil, 200); len(v["peers"].([]any)) != 2 || v["pending"] == nil {
		t.Fatalf("before import: %v", v)
	}

	for _, bad := range []string{`{`, `{"asn": "x"}`, `{"peers": [{"name": "a", "ip": "not-an-ip", "asn": 1}]}`} {
		call(t, env, api.RoutingConfig.Import, map[string]any{"documents": map[string]string{"etc/routing.json": bad}}, 400)
	}
	if v := call(t, env, api.BGPGet, nil, 200); len(v["peers"].([]any)) != 2 {
		t.Fatalf("a refused import changed the settings: %v", v)
	}
	call(t, env, api.RoutingConfig.Import, map[string]any{"documents": map[string]string{"etc/other.json": "{}"}}, 200)

	call(t, env, api.RoutingConfig.Import, map[string]any{"documents": map[string]string{"etc/routing.json": text}}, 200)
	v := call(t, env, api.BGPGet, nil, 200)
	if v["pending"] != nil || len(v["announce"].([]any)) != 1 || len(v["peers"].([]any)) != 1 {
		t.Errorf("after import: %v", v)
	}
	if p := peerOf(t, v, "up1"); p["password_set"] != true {
		t.Errorf("imported peer: %v", p)
	}
	if again := call(t, env, api.RoutingConfig.Export, nil, 200)["documents"].(map[string]any)["etc/routing.json"]; again != text {
		t.Errorf("export after import differs:\n%s\n---\n%s", again, text)
	}
}
