package dhcp

import (
	"context"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestImportWritesOnlyChanges: importing the documents just exported
// writes nothing (the configuration in force is not stored and applied
// again, no reservation is written); a reservations document with one
// reservation changed, one added and one left out writes exactly those,
// and the engine holds them; a changed etc/dhcp.json is stored and
// applied.
func TestImportWritesOnlyChanges(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tp := newTopo(t)
	env := testenv.Start(t)
	ctx := context.Background()
	cfg := kernelConfig(tp)
	cfg.Clients = append(cfg.Clients, cfg.Clients[0])
	cfg.Clients[1].MAC, cfg.Clients[1].IP, cfg.Clients[1].Hostname = "02:aa:00:00:00:06", cfg.Clients[1].IP.Next(), "reserved6"
	putConfig(t, env, configJSON(t, cfg))
	svc := startService(t, env, tp)
	svc.waitServing(t, env, 3)

	docs, err := bus.Invoke(ctx, env.NC, api.DHCPConfig.Export, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	resv, cfgText := docs.Documents[ReservationsDocument], docs.Documents[ConfigDocument]
	if !strings.Contains(resv, "reserved6") || cfgText == "" {
		t.Fatalf("exported: %v", docs.Documents)
	}
	revs := func() map[string]int64 {
		g, err := env.KV.Get(ctx, svc.svc.st.Key(""), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, kv := range g.Kvs {
			if k := string(kv.Key); strings.Contains(k, "/config") || strings.Contains(k, ResvPrefix) {
				m[k] = kv.ModRevision
			}
		}
		return m
	}
	before, state := revs(), svc.svc.State()
	a, err := bus.Invoke(ctx, env.NC, api.DHCPConfig.Import, docs)
	if err != nil || a.Message != "" || len(a.Documents) != 2 {
		t.Fatalf("import of the exported documents: %+v %v", a, err)
	}
	after := revs()
	for k, r := range before {
		if after[k] != r {
			t.Errorf("%s written again by an import of what is stored (revision %d, then %d)", k, r, after[k])
		}
	}
	if st := svc.svc.State(); st != state {
		t.Errorf("state after importing what is in force: %+v, was %+v", st, state)
	}

	// Client 5 renamed, 6 left out, 7 added; the DNS domain changed.
	resv = strings.Replace(resv, `"reserved5"`, `"renamed5"`, 1)
	resv = strings.Replace(resv, "02:AA:00:00:00:06", "02:AA:00:00:00:07", 1)
	resv = strings.Replace(resv, `"reserved6"`, `"reserved7"`, 1)
	changed := &api.ConfigDocuments{Documents: map[string]string{
		ConfigDocument:       strings.Replace(cfgText, "isp.example", "isp2.example", 1),
		ReservationsDocument: resv,
	}}
	if a, err := bus.Invoke(ctx, env.NC, api.DHCPConfig.Import, changed); err != nil || a.Message != "" {
		t.Fatalf("import of changed documents: %+v %v", a, err)
	}
	after2 := revs()
	for k, r := range after {
		switch {
		case strings.HasSuffix(k, "02:AA:00:00:00:06"):
			if _, ok := after2[k]; ok {
				t.Errorf("%s not deleted", k)
			}
		case strings.HasSuffix(k, "02:AA:00:00:00:05"), strings.HasSuffix(k, "/config"):
			if after2[k] == r {
				t.Errorf("%s not written", k)
			}
		case strings.Contains(k, ResvPrefix):
			if after2[k] != r {
				t.Errorf("%s written though unchanged", k)
			}
		}
	}
	eng, err := svc.svc.engine()
	if err != nil {
		t.Fatal(err)
	}
	if c, s := eng.ReservationCounts(); c != 2 || s != 1 {
		t.Errorf("engine holds %d clients and %d services, want 2 and 1", c, s)
	}
	if c, ok := eng.client("02:AA:00:00:00:05"); !ok || c.Hostname != "renamed5" {
		t.Errorf("client 5 in the engine: %+v %v", c, ok)
	}
	if _, ok := eng.client("02:AA:00:00:00:07"); !ok {
		t.Error("client 7 not in the engine")
	}
	if _, ok := eng.client("02:AA:00:00:00:06"); ok {
		t.Error("client 6 still in the engine")
	}
	if d := eng.Config().DNS.Domain; d != "isp2.example" {
		t.Errorf("engine's DNS domain %q after the import", d)
	}
}
