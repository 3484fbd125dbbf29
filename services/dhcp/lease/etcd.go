package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// KeyPrefix is where the dhcp service keeps leases in etcd; the service owns
// /router/dhcp/.
const KeyPrefix = "/router/dhcp/leases/"

// EtcdStore keeps leases in etcd, one key per lease, e.g.
// /router/dhcp/leases/v4/10.0.0.5 or /router/dhcp/leases/v6pd/2001:db8:a000::/56.
type EtcdStore struct {
	cli *clientv3.Client
	// MaxTxnOps is etcd's per-transaction limit (server flag --max-txn-ops,
	// default 128); bigger batches become several transactions sent at once.
	MaxTxnOps int
	// fence, when set, is a condition every write transaction must meet:
	// the host lock still held (store.Lock.Fence), so an engine whose lock
	// lapsed cannot overwrite the leases of the one that took over.
	fence []clientv3.Cmp
}

// ErrFenced is Apply's error when the fence condition failed: nothing was
// written.
var ErrFenced = errors.New("lease store: the host lock no longer holds; leases not written")

// NewEtcdStore returns a store on cli.
func NewEtcdStore(cli *clientv3.Client) *EtcdStore { return &EtcdStore{cli: cli, MaxTxnOps: 128} }

// Fenced returns a store whose every write transaction is conditional on
// cmp (store.Lock.Fence).
func (s *EtcdStore) Fenced(cmp clientv3.Cmp) *EtcdStore {
	c := *s
	c.fence = []clientv3.Cmp{cmp}
	return &c
}

// Load implements Store.
func (s *EtcdStore) Load(ctx context.Context) ([]Lease, error) {
	resp, err := s.cli.Get(ctx, KeyPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("load leases: %w", err)
	}
	out := make([]Lease, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var l Lease
		if err := json.Unmarshal(kv.Value, &l); err != nil {
			return nil, fmt.Errorf("lease %s: %w", kv.Key, err)
		}
		if got := KeyPrefix + l.Key(); got != string(kv.Key) {
			return nil, fmt.Errorf("lease stored under %s describes %s", kv.Key, strings.TrimPrefix(got, KeyPrefix))
		}
		out = append(out, l)
	}
	return out, nil
}

// Apply implements Store: the ops become ceil(n/MaxTxnOps) transactions,
// issued concurrently (their keys are distinct), and Apply returns once all
// are committed, which in etcd means fsynced on a quorum.
func (s *EtcdStore) Apply(ctx context.Context, ops []Op) error {
	max := s.MaxTxnOps
	if max <= 0 {
		max = 128
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for start := 0; start < len(ops); start += max {
		chunk := ops[start:min(start+max, len(ops))]
		tops := make([]clientv3.Op, 0, len(chunk))
		for _, op := range chunk {
			if op.Lease == nil {
				tops = append(tops, clientv3.OpDelete(KeyPrefix+op.Key))
				continue
			}
			b, err := json.Marshal(op.Lease)
			if err != nil {
				return err
			}
			tops = append(tops, clientv3.OpPut(KeyPrefix+op.Key, string(b)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.cli.Txn(ctx).If(s.fence...).Then(tops...).Commit()
			if err == nil && !resp.Succeeded {
				err = ErrFenced
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("commit leases: %w", errs[0])
	}
	return nil
}
