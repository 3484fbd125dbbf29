package olt_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/bus"
)

func (r *rig) op(t *testing.T, op api.Operation, body any, want int) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(body)
	rep, err := bus.Call(context.Background(), r.env.NC, op.Describe().Subject(), &pb.Request{Method: "POST", Args: raw})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(rep.Body, &m)
	if rep.Status != want {
		t.Fatalf("%s: status %d, want %d: %v", op.Describe().Name, rep.Status, want, m)
	}
	return m
}

// TestRegistryExportImport: the registry goes out as etc/olts.json with the
// credentials sealed (never in clear), and comes back whole through import
// (an OLT added since is removed, the one deleted since is back and its
// sealed credentials still open: an operation on it logs in); a document
// that does not parse or holds an invalid record is a 400 and changes
// nothing.
func TestRegistryExportImport(t *testing.T) {
	r := start(t)
	r.register(t, "east", map[string]any{"svlan": 3000, "comment": "pop east"})
	text, _ := r.op(t, api.OLTRegistryConfig.Export, nil, 200)["documents"].(map[string]any)["etc/olts.json"].(string)
	if !strings.Contains(text, `"name": "east"`) || !strings.Contains(text, `"sealed"`) || strings.Contains(text, simPass) || strings.Contains(text, simUser) {
		t.Fatalf("etc/olts.json:\n%s", text)
	}
	want(t, r.do(t, "DELETE", "/olts/east", nil, nil), 200)
	r.register(t, "west", nil)

	for _, bad := range []string{`{`, `{"olts": [{"name": "bad name", "host": "h", "port": 23, "protocol": "telnet"}]}`,
		`{"olts": [{"name": "a", "host": "h", "port": 23, "protocol": "gopher"}]}`} {
		r.op(t, api.OLTRegistryConfig.Import, map[string]any{"documents": map[string]string{"etc/olts.json": bad}}, 400)
	}
	r.op(t, api.OLTRegistryConfig.Import, map[string]any{"documents": map[string]string{"etc/olts.json": text}}, 200)
	a := r.do(t, "GET", "/olts", nil, nil)
	want(t, a, 200)
	if a.body["count"] != float64(1) || a.body["olts"].([]any)[0].(map[string]any)["name"] != "east" {
		t.Fatalf("after import: %s", a.raw)
	}
	envelope(t, r.do(t, "POST", "/olt/info", map[string]any{"olt": "east"}, nil), "info", 200)
}
