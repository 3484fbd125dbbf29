package client

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
)

// reshapedBatch is how many client records one etcd transaction reads (the
// server's limit on operations per transaction is 128 by default).
const reshapedBatch = 100

// Reshaped publishes client.reshaped, with the client, for every client of
// plan p, once the shaper has given the plan's subscribers new rates (POST
// /plans replacing the rates). Their records do not change, so without it
// a follower of the events (the monitor, a billing system) would never
// hear that they did. The plan's users come from its index keys (keys
// only), their records are read in transactions of reshapedBatch gets;
// the events carry the request's origin. It returns how many were
// published; a client deleted meanwhile is skipped.
func (b *Book) Reshaped(ctx context.Context, p string) (int, error) {
	resp, err := b.d.St.Client().Get(ctx, b.k.usesOf(p), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("clients of plan %s: %w", p, err)
	}
	o := api.OriginOf(ctx)
	req := &pb.Request{Caller: o.Caller, By: o.By, RequestID: o.RequestID}
	n := 0
	for i := 0; i < len(resp.Kvs); i += reshapedBatch {
		var ops []clientv3.Op
		for _, kv := range resp.Kvs[i:min(i+reshapedBatch, len(resp.Kvs))] {
			k := string(kv.Key)
			ops = append(ops, clientv3.OpGet(b.k.client(k[strings.LastIndexByte(k, '/')+1:])))
		}
		tr, err := b.d.St.Client().Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return n, fmt.Errorf("clients of plan %s: %w", p, err)
		}
		for _, r := range tr.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				var c api.Client
				if err := jsonDecode(kv.Value, &c); err != nil || c.Plan == nil || *c.Plan != p {
					continue // unreadable (GET /clients reports it) or moved meanwhile
				}
				b.d.Pub.Publish(api.ClientReshaped, req, c)
				n++
			}
		}
	}
	return n, nil
}
