package subscribers_test

import (
	"context"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestIndexMigrated: a store written before the plan and network index
// keys were one key a client (index/plan/..., index/net/...) is rewritten
// when the service starts: the old keys are gone, every client has its
// use key, and the plan's users are found from them (GET /plans counts
// one, DELETE /plans answers 409 naming it).
func TestIndexMigrated(t *testing.T) {
	r := startRig(t)
	ctx := context.Background()
	r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 20, "up_mbps": 10})
	for _, c := range []map[string]any{
		{"mac": "02:00:00:00:0b:01", "ip": "10.50.0.111", "hostname": "ongold", "plan": "gold"},
		{"mac": "02:00:00:00:0b:02", "ip": "10.50.0.112", "hostname": "noplan"},
	} {
		if st, m := r.do(t, "POST", "/clients", c); st != 201 {
			t.Fatalf("add %v: %d %v", c, st, m)
		}
	}
	keys := func(prefix string) []string {
		g, err := r.env.KV.Get(ctx, "/router/subscribers/index/"+prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range g.Kvs {
			out = append(out, string(kv.Key))
		}
		return out
	}
	want := []string{
		"/router/subscribers/index/use/gold/10.50.0.0_24/02:00:00:00:0B:01",
		"/router/subscribers/index/use/~/10.50.0.0_24/02:00:00:00:0B:02",
	}
	if got := keys("use/"); !slices.Equal(got, want) {
		t.Fatalf("use keys: %q, want %q", got, want)
	}

	// The layout of the version before.
	r.stopSubs()
	if _, err := r.env.KV.Txn(ctx).Then(
		clientv3.OpDelete("/router/subscribers/index/use/", clientv3.WithPrefix()),
		clientv3.OpPut("/router/subscribers/index/plan/gold/02:00:00:00:0B:01", ""),
		clientv3.OpPut("/router/subscribers/index/net/10.50.0.0_24/02:00:00:00:0B:01", ""),
		clientv3.OpPut("/router/subscribers/index/net/10.50.0.0_24/02:00:00:00:0B:02", ""),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	r.startSubscribers(t)
	if got := keys("use/"); !slices.Equal(got, want) {
		t.Errorf("use keys after the start: %q, want %q", got, want)
	}
	if old := append(keys("plan/"), keys("net/")...); len(old) > 0 {
		t.Errorf("old index keys left: %q", old)
	}
	st, m := r.do(t, "GET", "/plans", nil)
	if plans, _ := m["plans"].([]any); st != 200 || len(plans) != 1 || plans[0].(map[string]any)["clients"] != float64(1) {
		t.Errorf("GET /plans: %d %v", st, m)
	}
	if st, m := r.do(t, "DELETE", "/plans/gold", nil); st != 409 || !slices.Equal(m["clients"].([]any), []any{"02:00:00:00:0B:01"}) {
		t.Errorf("DELETE /plans/gold: %d %v", st, m)
	}
}
