// Package store keeps typed JSON documents in etcd. Every key lives under
// /router/<service>/..., owned by exactly one service. Changes that touch
// several keys go through one transaction with optimistic concurrency on the
// keys' revisions, so two writers can never interleave half-applied changes.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Root is the prefix of every key the router writes.
const Root = "/router/"

// ErrNotFound is returned by Get for an absent key.
var ErrNotFound = errors.New("store: not found")

// ErrConflict is returned by Commit when a compared key changed meanwhile.
var ErrConflict = errors.New("store: document changed concurrently")

// ErrLockLost is returned by a fenced store's Commit when the lock it is
// fenced by no longer holds (it lapsed or was released, and another process
// may hold it now): the transaction wrote nothing.
var ErrLockLost = errors.New("store: the lock fencing this store is no longer held")

// BrokenError lists stored documents that no longer parse. The API shows
// them in broken_data_files so an operator knows what to repair.
type BrokenError struct{ Keys []string }

func (e *BrokenError) Error() string {
	return "store: unparsable documents: " + strings.Join(e.Keys, ", ")
}

// BrokenDocuments names the damaged documents relative to Root.
func (e *BrokenError) BrokenDocuments() []string {
	out := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		out[i] = strings.TrimPrefix(k, Root)
	}
	return out
}

// Store is a handle on etcd scoped to one service's prefix.
type Store struct {
	cli    *clientv3.Client
	prefix string
	// fence, when set, is the lock every write is conditional on (Fenced).
	fence *Lock
}

// New returns a store whose keys live under /router/<service>/.
func New(cli *clientv3.Client, service string) *Store {
	return &Store{cli: cli, prefix: Root + service + "/"}
}

// Fenced returns a store on the same prefix whose every write holds only
// while l does: each Txn's Commit also compares, in the same etcd
// transaction, that l's claim key still exists with the create revision it
// was acquired at, and fails with ErrLockLost, writing nothing, when it does
// not. A holder whose lock lapsed while it was busy (a long pause, etcd
// unreachable for LockTTL) therefore cannot overwrite what the new holder
// writes. s itself stays unfenced.
func (s *Store) Fenced(l *Lock) *Store {
	f := *s
	f.fence = l
	return &f
}

// Client is the underlying etcd client (for leases, locks and watches).
// Writes made on it directly bypass the fence of a Fenced store.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Key returns the full key of a document path inside the service prefix.
func (s *Store) Key(parts ...string) string { return s.prefix + strings.Join(parts, "/") }

// Item is one listed document with the revision it was last changed at.
type Item[T any] struct {
	Key         string
	Value       T
	ModRevision int64
}

// Get reads one document. The revision is the key's mod revision, for a
// later Txn.IfRevision.
func Get[T any](ctx context.Context, s *Store, key string) (T, int64, error) {
	var v T
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return v, 0, fmt.Errorf("store: get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return v, 0, ErrNotFound
	}
	kv := resp.Kvs[0]
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return v, 0, &BrokenError{Keys: []string{key}}
	}
	return v, kv.ModRevision, nil
}

// List reads every document under prefix (a path inside the service's
// prefix, e.g. s.Key("plans")+"/"), sorted by key. Documents that do not
// parse are reported together in a *BrokenError.
func List[T any](ctx context.Context, s *Store, prefix string) ([]Item[T], error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", prefix, err)
	}
	items := make([]Item[T], 0, len(resp.Kvs))
	var broken []string
	for _, kv := range resp.Kvs {
		var v T
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			broken = append(broken, string(kv.Key))
			continue
		}
		items = append(items, Item[T]{Key: string(kv.Key), Value: v, ModRevision: kv.ModRevision})
	}
	if len(broken) > 0 {
		return nil, &BrokenError{Keys: broken}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Key < items[j].Key })
	return items, nil
}

// Count returns how many keys live under prefix without reading them.
func (s *Store) Count(ctx context.Context, prefix string) (int64, error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("store: count %s: %w", prefix, err)
	}
	return resp.Count, nil
}

// Txn collects conditions and writes that commit atomically.
type Txn struct {
	s    *Store
	cmps []clientv3.Cmp
	ops  []clientv3.Op
	err  error
}

// Txn starts a transaction.
func (s *Store) Txn() *Txn { return &Txn{s: s} }

// IfAbsent makes the commit fail with ErrConflict when key exists.
func (t *Txn) IfAbsent(key string) *Txn {
	t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
	return t
}

// IfRevision makes the commit fail with ErrConflict when key was changed
// after rev (0 means: must still be absent).
func (t *Txn) IfRevision(key string, rev int64) *Txn {
	t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	return t
}

// Put stores v as JSON under key.
func (t *Txn) Put(key string, v any) *Txn {
	raw, err := json.Marshal(v)
	if err != nil {
		t.err = errors.Join(t.err, fmt.Errorf("store: encode %s: %w", key, err))
		return t
	}
	t.ops = append(t.ops, clientv3.OpPut(key, string(raw)))
	return t
}

// Delete removes key.
func (t *Txn) Delete(key string) *Txn {
	t.ops = append(t.ops, clientv3.OpDelete(key))
	return t
}

// DeletePrefix removes every key under prefix (one operation, however
// many keys): how a whole area is replaced in one transaction.
func (t *Txn) DeletePrefix(prefix string) *Txn {
	t.ops = append(t.ops, clientv3.OpDelete(prefix, clientv3.WithPrefix()))
	return t
}

// DeleteRange removes every key from from up to, not including, to (one
// operation): how a bounded history drops its oldest entries in the same
// transaction that adds the newest.
func (t *Txn) DeleteRange(from, to string) *Txn {
	t.ops = append(t.ops, clientv3.OpDelete(from, clientv3.WithRange(to)))
	return t
}

// Commit applies every write when every condition holds; otherwise it writes
// nothing and returns ErrConflict, or ErrLockLost when the store is fenced
// and its lock no longer holds. It returns the new store revision.
func (t *Txn) Commit(ctx context.Context) (int64, error) {
	if t.err != nil {
		return 0, t.err
	}
	l := t.s.fence
	if l == nil {
		resp, err := t.s.cli.Txn(ctx).If(t.cmps...).Then(t.ops...).Commit()
		if err != nil {
			return 0, fmt.Errorf("store: commit: %w", err)
		}
		if !resp.Succeeded {
			return 0, ErrConflict
		}
		return resp.Header.Revision, nil
	}
	// The claim key is read in the Else branch so that a failed commit says
	// which condition failed as of the transaction's own revision, not of a
	// later read.
	cmps := append(append(make([]clientv3.Cmp, 0, len(t.cmps)+1), t.cmps...), l.fence())
	resp, err := t.s.cli.Txn(ctx).If(cmps...).Then(t.ops...).Else(clientv3.OpGet(l.key)).Commit()
	if err != nil {
		return 0, fmt.Errorf("store: commit: %w", err)
	}
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) != 1 || kvs[0].CreateRevision != l.rev {
			return 0, ErrLockLost
		}
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}
