package olt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/services/olt"
	"routerd.dev/shared/testenv"
)

func TestBackupsAndDiff(t *testing.T) {
	r := start(t)
	want(t, r.do(t, "GET", "/olt/backups", nil, nil), 400) // none registered
	r.register(t, "lab", nil)
	a := r.do(t, "GET", "/olt/diff", nil, nil)
	want(t, a, 404)

	a = r.do(t, "POST", "/olt/backup", map[string]any{}, nil)
	want(t, a, 200)
	b := a.body["backups"].([]any)[0].(map[string]any)
	if a.body["ok"] != true || b["rev"] != float64(1) || b["changed"] != true || b["lines"].(float64) < 10 {
		t.Fatalf("backup: %s", a.raw)
	}
	// Unchanged: no new revision.
	a = r.do(t, "GET", "/api?action=olt-backup&olt=lab", nil, nil)
	want(t, a, 200)
	if b := a.body["backups"].([]any)[0].(map[string]any); b["rev"] != float64(1) || b["changed"] != false {
		t.Errorf("second backup: %s", a.raw)
	}
	// Nothing changed yet: an empty diff against now.
	a = r.do(t, "GET", "/olt/diff?olt=lab", nil, nil)
	want(t, a, 200)
	if a.body["changed"] != false || a.body["diff"] != "" {
		t.Errorf("diff of nothing: %s", a.raw)
	}
	// A change on the OLT, then diff against now and a second revision.
	envelope(t, r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 321, "description": "backup-test"}, nil), "vlan-add", 200)
	a = r.do(t, "GET", "/olt/diff", nil, nil)
	want(t, a, 200)
	diff, _ := a.body["diff"].(string)
	if a.body["changed"] != true || a.body["from"] != "rev 1" || a.body["to"] != "now" ||
		!strings.Contains(diff, "+ vlan 321 smart") || !strings.HasPrefix(diff, "--- rev 1\n+++ now\n@@ ") {
		t.Errorf("diff against now: %s", a.raw)
	}
	a = r.do(t, "POST", "/olt/backup", map[string]any{"olt": "lab"}, nil)
	if b := a.body["backups"].([]any)[0].(map[string]any); b["rev"] != float64(2) || b["changed"] != true {
		t.Errorf("backup after a change: %s", a.raw)
	}
	a = r.do(t, "GET", "/api?action=olt-diff&olt=lab&rev=1&to=2", nil, nil)
	want(t, a, 200)
	if a.body["to"] != "rev 2" || !strings.Contains(a.body["diff"].(string), "+ vlan 321 smart") || a.body["removed"] != float64(0) {
		t.Errorf("diff 1..2: %s", a.raw)
	}
	want(t, r.do(t, "GET", "/olt/diff?rev=9", nil, nil), 404)
	want(t, r.do(t, "GET", "/olt/diff?to=soon", nil, nil), 400)
	a = r.do(t, "GET", "/olt/backups?n=1", nil, nil)
	want(t, a, 200)
	if a.body["count"] != float64(1) || a.body["backups"].([]any)[0].(map[string]any)["rev"] != float64(2) {
		t.Errorf("backups n=1: %s", a.raw)
	}
	a = r.do(t, "GET", "/olt/backups", nil, nil)
	if a.body["count"] != float64(2) {
		t.Errorf("backups: %s", a.raw)
	}
	// Stored compressed, never in clear.
	resp, err := r.env.KV.Get(context.Background(), "/router/olt/backup-data/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("backup data: %v %v", resp, err)
	}
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Value), "vlan") {
			t.Errorf("backup stored uncompressed: %s", kv.Key)
		}
	}
	// An unreachable OLT: 502 with its error, the others still done.
	r.register(t, "gone", map[string]any{"host": "127.0.0.1", "port": 1})
	a = r.do(t, "POST", "/olt/backup", map[string]any{"timeout": 10}, nil)
	want(t, a, 502)
	if a.body["ok"] != false || a.body["count"] != float64(2) {
		t.Errorf("backup with a dead OLT: %s", a.raw)
	}
}

func TestPeriodicBackupKeepsABoundedHistory(t *testing.T) {
	r := start(t)
	r.register(t, "lab", nil)
	o := olt.New(olt.Deps{NC: r.env.NC, KV: r.env.KV, StateDir: r.state, BackupEvery: 50 * time.Millisecond, BackupKeep: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	count := func() int64 {
		resp, err := r.env.KV.Get(context.Background(), "/router/olt/backup-index/lab/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	for i := range 3 {
		want(t, r.do(t, "POST", "/olt/sysname", map[string]any{"name": "P" + string(rune('A'+i))}, nil), 200)
		n := r.sim.OLT(0).Received("display current-configuration")
		deadline := time.Now().Add(10 * time.Second)
		for r.sim.OLT(0).Received("display current-configuration") < n+1 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if c := count(); c != 2 {
			return fmt.Errorf("%d revisions kept, want 2", c)
		}
		return nil
	})
	a := r.do(t, "GET", "/olt/backups", nil, nil)
	if a.body["count"] != float64(2) || a.body["backups"].([]any)[0].(map[string]any)["trigger"] != "periodic" {
		t.Errorf("backups: %s", a.raw)
	}
}

func TestSyncPlans(t *testing.T) {
	r := start(t)
	// No OLT registered: the plan answer's olt is null.
	a := r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 100, "up_mbps": 20}, nil)
	want(t, a, 201)
	if v, ok := a.body["olt"]; !ok || v != nil {
		t.Errorf("olt with none registered: %s", a.raw)
	}
	r.register(t, "lab", nil)
	a = r.do(t, "GET", "/api?action=olt-sync&dry_run=1", nil, nil)
	want(t, a, 200)
	if a.body["plans"] != float64(1) || a.body["dry_run"] != true || !strings.Contains(a.raw, "router_110000k") {
		t.Errorf("dry sync: %s", a.raw)
	}
	if r.sim.OLT(0).Received("traffic table ip name") != 0 {
		t.Error("a dry run created a traffic table")
	}
	a = r.do(t, "POST", "/olt/sync", map[string]any{"olt": "lab"}, nil)
	want(t, a, 200)
	if r.sim.OLT(0).Received("traffic table ip name") != 2 {
		t.Errorf("sync sent %d traffic tables, want 2: %s", r.sim.OLT(0).Received("traffic table ip name"), a.raw)
	}
	// Again: nothing new.
	want(t, r.do(t, "POST", "/olt/sync", map[string]any{}, nil), 200)
	if r.sim.OLT(0).Received("traffic table ip name") != 2 {
		t.Error("a second sync created tables again")
	}
	want(t, r.do(t, "POST", "/olt/sync", map[string]any{"olt": "nosuch"}, nil), 404)

	// A new plan starts the same work in the background: olt says how
	// many OLTs, and the new plan's tables appear on the OLT.
	a = r.do(t, "POST", "/plans", map[string]any{"name": "silver", "down_mbps": 50, "up_mbps": 10}, nil)
	want(t, a, 201)
	if a.body["olt"] != float64(1) {
		t.Errorf("olt after a plan change: %s", a.raw)
	}
	testenv.WaitFor(t, 10*time.Second, "the new plan's traffic tables", func() bool {
		return r.sim.OLT(0).Received("traffic table ip name") == 4
	})
}

func TestWritesNeedTheLicence(t *testing.T) {
	r := start(t)
	r.register(t, "lab", nil)
	sub, err := r.env.NC.SubscribeSync("router.events.olt.licence")
	if err != nil {
		t.Fatal(err)
	}
	lic := filepath.Join(r.state, olt.LicenceFile)
	for _, c := range []struct{ name, content string }{
		{"missing", ""}, {"no feature", `{"features":["bgp"]}`}, {"expired", `{"features":["olt-write"],"expires":"2020-01-01"}`},
	} {
		if c.content == "" {
			os.Remove(lic)
		} else if err := os.WriteFile(lic, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		before := r.sim.OLT(0).Commands()
		a := r.do(t, "POST", "/olt/sysname", map[string]any{"name": "X"}, nil)
		want(t, a, 409)
		if a.body["licence"] == nil || !strings.Contains(a.raw, "olt-write") {
			t.Errorf("%s: %s", c.name, a.raw)
		}
		if r.sim.OLT(0).Commands() != before {
			t.Errorf("%s: commands sent without a licence", c.name)
		}
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Errorf("%s: no licence event", c.name)
		}
		// Reads and dry runs still work.
		envelope(t, r.do(t, "POST", "/olt/info", map[string]any{}, nil), "info", 200)
		envelope(t, r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 55, "dry_run": true}, nil), "vlan-add", 200)
	}
	os.WriteFile(lic, []byte(`{"features":["olt-write"],"expires":"2999-01-01"}`), 0o600)
	envelope(t, r.do(t, "POST", "/olt/sysname", map[string]any{"name": "X"}, nil), "sysname", 200)
}
