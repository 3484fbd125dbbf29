package client

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/store"
)

// MigrateIndex rewrites the plan and network index keys of a store
// written before they were one key a client (index/plan/<plan>/<MAC> and
// index/net/<network>/<MAC>, now index/use/...): every client's use key
// is put and the old keys deleted. It runs before the replica serves, and
// does nothing (two counts) when no old key is stored. It returns how
// many clients it went through.
func (b *Book) MigrateIndex(ctx context.Context) (int, error) {
	old := []string{b.d.St.Key("index", "plan") + "/", b.d.St.Key("index", "net") + "/"}
	stored := int64(0)
	for _, p := range old {
		n, err := b.d.St.Count(ctx, p)
		if err != nil {
			return 0, err
		}
		stored += n
	}
	if stored == 0 {
		return 0, nil
	}
	n := 0
	for after := ""; ; {
		p, err := b.page(ctx, after, renderPage, "")
		if err != nil {
			return n, err
		}
		for i := 0; i < len(p.Clients); i += store.MaxTxnOps {
			var ops []clientv3.Op
			for _, c := range p.Clients[i:min(i+store.MaxTxnOps, len(p.Clients))] {
				ops = append(ops, clientv3.OpPut(b.k.use(&c), ""))
			}
			if _, err := b.d.St.Client().Txn(ctx).Then(ops...).Commit(); err != nil {
				return n, fmt.Errorf("clients: index keys: %w", err)
			}
		}
		n += len(p.Clients)
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if _, err := b.d.St.Client().Txn(ctx).Then(
		clientv3.OpDelete(old[0], clientv3.WithPrefix()),
		clientv3.OpDelete(old[1], clientv3.WithPrefix()),
	).Commit(); err != nil {
		return n, fmt.Errorf("clients: old index keys: %w", err)
	}
	return n, nil
}
