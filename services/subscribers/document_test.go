package subscribers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/docobj"
)

// TestDocumentsStreamed: past docobj.InlineMax (made small here) the
// clients' and the reservations' documents travel as objects of the
// document store; an import reads them as streams: a duplicate in the
// last record refuses the whole document and changes nothing, the
// document brings back a client deleted since, and dhcp's import of a
// reservations document without one client removes that reservation.
func TestDocumentsStreamed(t *testing.T) {
	old := docobj.InlineMax
	docobj.InlineMax = 4 << 10
	t.Cleanup(func() { docobj.InlineMax = old })
	r := startRig(t)
	ctx := context.Background()
	nc := r.env.NC
	r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 20, "up_mbps": 10})
	const n = 60
	for i := 0; i < n; i++ {
		if st, m := r.do(t, "POST", "/clients", map[string]any{"mac": fmt.Sprintf("02:00:00:00:09:%02x", i),
			"ip": fmt.Sprintf("10.50.0.%d", 100+i), "hostname": fmt.Sprintf("s%d", i), "plan": "gold"}); st != 201 {
			t.Fatalf("add %d: %d %v", i, st, m)
		}
	}
	docs, err := bus.Invoke(ctx, nc, api.SubscribersConfig.Export, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	obj, ok := docs.Objects["etc/clients.json"]
	if _, inline := docs.Documents["etc/clients.json"]; !ok || inline || docs.Documents["etc/plans.json"] == "" {
		t.Fatalf("export: %+v", docs)
	}
	t.Cleanup(func() { docobj.Delete(context.Background(), nc, docs.Objects) })
	text, err := docobj.Text(ctx, nc, obj)
	var doc struct{ Clients []api.Client }
	if err != nil || json.Unmarshal([]byte(text), &doc) != nil || len(doc.Clients) != n || int64(len(text)) != obj.Bytes {
		t.Fatalf("exported object: %d clients, %d bytes of %d, %v", len(doc.Clients), len(text), obj.Bytes, err)
	}
	r.do(t, "DELETE", "/clients/02:00:00:00:09:00", nil)

	// The last client takes the first one's address: 400, nothing changed.
	bad := strings.Replace(text, `"10.50.0.159"`, `"10.50.0.101"`, 1)
	bobj, err := docobj.Write(ctx, nc, "etc/clients.json", func(w io.Writer) error { _, err := io.WriteString(w, bad); return err })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docobj.Delete(context.Background(), nc, map[string]api.ConfigObject{"x": bobj}) })
	_, err = bus.Invoke(ctx, nc, api.SubscribersConfig.Import, &api.ConfigDocuments{Objects: map[string]api.ConfigObject{"etc/clients.json": bobj}})
	if err == nil || !strings.Contains(err.Error(), "also held") {
		t.Fatalf("import of a duplicate: %v", err)
	}
	if st, _ := r.do(t, "GET", "/clients/02:00:00:00:09:3b", nil); st != 200 {
		t.Errorf("a refused import changed the clients")
	}
	if st, _ := r.do(t, "GET", "/clients/02:00:00:00:09:00", nil); st != 404 {
		t.Errorf("a refused import brought a client back")
	}
	// The exported document back: the deleted client returns.
	if _, err := bus.Invoke(ctx, nc, api.SubscribersConfig.Import, &api.ConfigDocuments{Objects: docs.Objects}); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.do(t, "GET", "/clients/02:00:00:00:09:00", nil); st != 200 {
		t.Errorf("imported client missing")
	}
	eventually(t, "the restored client's reservation", func() bool { return r.reservation(t, "02:00:00:00:09:00") != "" })

	// dhcp's reservations document, streamed both ways: one without the
	// first client's reservation removes it and keeps the others.
	eventually(t, "every client reserved", func() bool {
		g, err := r.env.KV.Get(ctx, "/router/dhcp/reservations/clients/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && g.Count == n
	})
	d, err := bus.Invoke(ctx, nc, api.DHCPConfig.Export, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	robj, ok := d.Objects["etc/dhcp-reservations.json"]
	if !ok {
		t.Fatalf("dhcp export: %+v", d)
	}
	t.Cleanup(func() { docobj.Delete(context.Background(), nc, d.Objects) })
	rtext, err := docobj.Text(ctx, nc, robj)
	if err != nil {
		t.Fatal(err)
	}
	var resv struct {
		Clients  []map[string]any `json:"clients"`
		Services []map[string]any `json:"services"`
	}
	if err := json.Unmarshal([]byte(rtext), &resv); err != nil || len(resv.Clients) != n {
		t.Fatalf("reservations document: %d clients, %v", len(resv.Clients), err)
	}
	resv.Clients = resv.Clients[1:]
	fewer, _ := json.Marshal(resv)
	fobj, err := docobj.Write(ctx, nc, "etc/dhcp-reservations.json", func(w io.Writer) error { _, err := w.Write(fewer); return err })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docobj.Delete(context.Background(), nc, map[string]api.ConfigObject{"x": fobj}) })
	res, err := bus.Invoke(ctx, nc, api.DHCPConfig.Import, &api.ConfigDocuments{Objects: map[string]api.ConfigObject{"etc/dhcp-reservations.json": fobj}})
	if err != nil || res.Message != "" || strings.Join(res.Documents, ",") != "etc/dhcp-reservations.json" {
		t.Fatalf("dhcp import: %+v %v", res, err)
	}
	g, err := r.env.KV.Get(ctx, "/router/dhcp/reservations/clients/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || g.Count != n-1 || r.reservation(t, "02:00:00:00:09:00") != "" || r.reservation(t, "02:00:00:00:09:01") == "" {
		t.Errorf("reservations after the import: %d stored, want %d", g.Count, n-1)
	}
}
