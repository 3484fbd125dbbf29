package route

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Replace makes the stored routes exactly rs, in one transaction (one etcd
// operation per route: etcd's limit of operations per transaction bounds
// how many routes one replace carries), then reconciles the kernel with
// them. Every route is validated first (and its interface must exist); an
// invalid one refuses the whole replace and nothing changes.
func (t *Table) Replace(ctx context.Context, rs []Route) (Reconciled, error) {
	keep := map[string]Route{}
	for _, in := range rs {
		r, s, err := parse(Input{Prefix: in.Prefix, Via: in.Via, Dev: in.Dev, Comment: in.Comment})
		if err != nil {
			return Reconciled{}, fmt.Errorf("route %s: %w", describe(in), err)
		}
		if _, err := t.kernelRoute(s); err != nil {
			return Reconciled{}, fmt.Errorf("route %s: %w", describe(in), err)
		}
		r.Created = in.Created
		if r.Created == "" {
			r.Created = t.now().Format(TimeLayout)
		}
		keep[id(r)] = r
	}
	t.mu.Lock()
	st := t.store()
	prefix := st.Key("routes") + "/"
	resp, err := st.Client().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.mu.Unlock()
		return Reconciled{}, fmt.Errorf("reading the stored routes: %w", err)
	}
	txn := st.Txn()
	for _, kv := range resp.Kvs {
		if _, ok := keep[string(kv.Key)[len(prefix):]]; !ok {
			txn.Delete(string(kv.Key))
		}
	}
	for k, r := range keep {
		txn.Put(prefix+k, r)
	}
	_, err = txn.Commit(ctx)
	t.mu.Unlock()
	if err != nil {
		return Reconciled{}, storeError(err, "storing the routes")
	}
	return t.Reconcile(ctx)
}
