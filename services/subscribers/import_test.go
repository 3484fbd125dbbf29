package subscribers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/shared/bus"
)

// TestImportWritesDifference: an import of etc/clients.json writes only
// what differs from the stored clients. The document just exported writes
// no key; one with a client's address changed, a client left out and a
// client unchanged moves the first (its old address free for another
// client), removes the second with its index keys, and leaves the third's
// keys at their revisions.
func TestImportWritesDifference(t *testing.T) {
	r := startRig(t)
	ctx := context.Background()
	r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 20, "up_mbps": 10})
	for _, c := range []map[string]any{
		{"mac": "02:00:00:00:0a:01", "ip": "10.50.0.101", "hostname": "moved", "plan": "gold"},
		{"mac": "02:00:00:00:0a:02", "ip": "10.50.0.102", "hostname": "dropped", "plan": "gold"},
		{"mac": "02:00:00:00:0a:03", "ip": "10.50.0.103", "hostname": "kept"},
	} {
		if st, m := r.do(t, "POST", "/clients", c); st != 201 {
			t.Fatalf("add %v: %d %v", c, st, m)
		}
	}
	revs := func() map[string]int64 {
		g, err := r.env.KV.Get(ctx, "/router/subscribers/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, kv := range g.Kvs {
			if k := string(kv.Key); strings.Contains(k, "/clients/") || strings.Contains(k, "/index/") {
				m[k] = kv.ModRevision
			}
		}
		return m
	}
	docs, err := bus.Invoke(ctx, r.env.NC, api.SubscribersConfig.Export, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	text := docs.Documents["etc/clients.json"]
	if !strings.Contains(text, "dropped") {
		t.Fatalf("exported: %v", docs.Documents)
	}
	before := revs()
	if _, err := bus.Invoke(ctx, r.env.NC, api.SubscribersConfig.Import, docs); err != nil {
		t.Fatal(err)
	}
	if after := revs(); len(after) != len(before) {
		t.Errorf("%d keys after importing what is stored, %d before", len(after), len(before))
	} else {
		for k, rev := range before {
			if after[k] != rev {
				t.Errorf("%s written again by an import of what is stored", k)
			}
		}
	}

	// The document as an operator would edit it: client 1 moved to .111,
	// client 2 left out.
	var doc struct {
		Clients []map[string]any `json:"clients"`
	}
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	var kept []map[string]any
	for _, c := range doc.Clients {
		switch c["hostname"] {
		case "moved":
			c["ip"] = "10.50.0.111"
		case "dropped":
			continue
		}
		kept = append(kept, c)
	}
	doc.Clients = kept
	raw, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	changed := &api.ConfigDocuments{Documents: map[string]string{"etc/clients.json": string(raw) + "\n"}}
	if _, err := bus.Invoke(ctx, r.env.NC, api.SubscribersConfig.Import, changed); err != nil {
		t.Fatal(err)
	}
	after := revs()
	for k, rev := range before {
		switch {
		case strings.Contains(k, "02:00:00:00:0A:02") || strings.HasSuffix(k, "/dropped") || strings.HasSuffix(k, "/10.50.0.102"):
			if _, ok := after[k]; ok {
				t.Errorf("%s of the client left out is still stored", k)
			}
		case strings.HasSuffix(k, "/10.50.0.101"):
			if _, ok := after[k]; ok {
				t.Errorf("the moved client's old address is still indexed: %s", k)
			}
		case strings.Contains(k, "02:00:00:00:0A:03") || strings.HasSuffix(k, "/kept") || strings.HasSuffix(k, "/10.50.0.103"):
			if after[k] != rev {
				t.Errorf("%s of the unchanged client written again", k)
			}
		}
	}
	if st, m := r.do(t, "GET", "/clients/02:00:00:00:0a:01", nil); st != 200 || m["client"].(map[string]any)["ip"] != "10.50.0.111" {
		t.Errorf("moved client: %d %v", st, m)
	}
	if st, _ := r.do(t, "GET", "/clients/02:00:00:00:0a:02", nil); st != 404 {
		t.Errorf("client left out: %d", st)
	}
	// The effects follow by the reconcile the import asks for.
	eventually(t, "the moved client's reservation", func() bool {
		return strings.HasPrefix(r.reservation(t, "02:00:00:00:0A:01"), "10.50.0.111 ") && r.reservation(t, "02:00:00:00:0A:02") == ""
	})
	if st, m := r.do(t, "POST", "/clients", map[string]any{"mac": "02:00:00:00:0a:04", "ip": "10.50.0.101", "hostname": "dropped"}); st != 201 {
		t.Errorf("the freed address and hostname for a new client: %d %v", st, m)
	}
}

// TestImportHeldForRestore: an import that is part of a restore
// (ConfigDocuments.Restore, dhcp's reservations imported beside it) holds
// the reconcile of the clients' effects until the system service's
// config.restored event of that restore: a reservation missing after the
// import is not made again while the restore runs, nor at the end of
// another restore, and is made once this one ends. An import outside a
// restore reconciles at once (which also leaves no reconcile of the
// service's start pending that could make it beside the test).
func TestImportHeldForRestore(t *testing.T) {
	r := startRig(t)
	ctx := context.Background()
	const mac = "02:00:00:00:0A:01"
	if st, m := r.do(t, "POST", "/clients", map[string]any{"mac": mac, "ip": "10.50.0.101", "hostname": "held"}); st != 201 {
		t.Fatalf("add: %d %v", st, m)
	}
	docs, err := bus.Invoke(ctx, r.env.NC, api.SubscribersConfig.Export, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	unreserve := func() {
		t.Helper()
		if _, err := bus.Invoke(ctx, r.env.NC, api.ReservationDelete, &api.ReservationRef{MAC: mac}); err != nil {
			t.Fatal(err)
		}
		if got := r.reservation(t, mac); got != "" {
			t.Fatalf("reservation still held after its deletion: %s", got)
		}
	}
	unreserve()
	if _, err := bus.Invoke(ctx, r.env.NC, api.SubscribersConfig.Import, docs); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reservation made by the reconcile after an import", func() bool { return r.reservation(t, mac) != "" })

	unreserve()
	docs.Restore = "r1"
	if _, err := bus.Invoke(ctx, r.env.NC, api.SubscribersConfig.Import, docs); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(r.env.NC, "system", nil)
	pub.Publish(event.ConfigRestored, nil, event.RestoreEnd{Restore: "r0", OK: true})
	// A reconcile of one client takes milliseconds.
	time.Sleep(1500 * time.Millisecond)
	if got := r.reservation(t, mac); got != "" {
		t.Fatalf("the reservation was made before the restore's end: %s", got)
	}
	pub.Publish(event.ConfigRestored, nil, event.RestoreEnd{Restore: "r1", OK: false})
	eventually(t, "the reservation made after the restore's end", func() bool { return r.reservation(t, mac) != "" })
}
