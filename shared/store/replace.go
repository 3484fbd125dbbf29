package store

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Limits of one etcd transaction a bulk writer keeps to: etcd's defaults
// (--max-txn-ops 128, --max-request-bytes 1.5 MiB), so that an external
// etcd left at its defaults takes every batch.
const (
	MaxTxnOps   = 128
	MaxTxnBytes = 1 << 20
)

// ReplaceWorkers is how many transactions a Replace keeps in flight: etcd
// puts concurrent proposals in one raft batch (one WAL fsync for all), so
// a few writers in parallel store more per second than one after the
// other (500,000 keys in transactions of 125: 7.2 s one at a time, 5.1 s
// with 8 in flight, on the shared 2-core machine of 2026-11-27).
var ReplaceWorkers = 8

// replacePage is how many keys one read of the stored keys fetches.
const replacePage = 10000

// Replace makes the keys under a set of prefixes exactly the pairs given
// to Put, writing only what differs: a key stored with the same value is
// not written again (no new revision, no watch event), a key with
// another value or not stored is put, and a stored key never given is
// deleted at Close. It is how a configuration document replaces an area
// of many keys (100,000 clients with their index keys) without holding
// the document or the stored keys: what it keeps of the stored keys is a
// fingerprint of each key and of its value (16 bytes a key) and a bit
// saying whether it was given.
//
// Fingerprints are 64-bit hashes with a seed of the process: a stored key
// sharing both its key's and its value's fingerprint with another pair,
// about one chance in 10^8 at 500,000 keys, would be taken as unchanged.
//
// The writes are transactions of up to MaxTxnOps operations and
// MaxTxnBytes, ReplaceWorkers of them in flight, through the store (a
// fenced store's writes hold only while its lock does). They are not one
// transaction: a failure half way leaves part written, and Close says how
// far it got. Keys given to Put must be distinct.
type Replace struct {
	ctx      context.Context
	st       *Store
	prefixes []string
	seed     maphash.Seed
	// stored are the fingerprints of the stored keys, sorted by key;
	// given marks those Put named.
	stored []fingerprint
	given  []uint64
	nGiven int
	same   int   // keys given with the value stored
	rev    int64 // the revision the stored keys were read at

	ops   []clientv3.Op
	bytes int
	work  chan []clientv3.Op
	wg    sync.WaitGroup

	mu  sync.Mutex
	res ReplaceResult
	err error
}

type fingerprint struct{ key, val uint64 }

// ReplaceResult says what a Replace did.
type ReplaceResult struct {
	Unchanged int // keys given with the value stored
	Written   int // keys put (new or changed)
	Deleted   int // stored keys not given
	// Revision is the revision of the last write (0 when nothing was
	// written): a watcher that has seen it has seen every write.
	Revision int64
}

// Replace reads the fingerprints of the keys stored under prefixes (full
// keys, e.g. s.Key("clients")+"/") at one revision and starts the writers.
// The caller gives every wanted pair to Put, then calls Close.
func (s *Store) Replace(ctx context.Context, prefixes ...string) (*Replace, error) {
	r := &Replace{ctx: ctx, st: s, prefixes: prefixes, seed: maphash.MakeSeed()}
	for _, p := range prefixes {
		end := clientv3.GetPrefixRangeEnd(p)
		for key := p; ; {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(replacePage)}
			if r.rev != 0 {
				opts = append(opts, clientv3.WithRev(r.rev))
			}
			resp, err := s.cli.Get(ctx, key, opts...)
			if err != nil {
				return nil, fmt.Errorf("store: reading %s: %w", p, err)
			}
			if r.rev == 0 {
				r.rev = resp.Header.Revision
			}
			for _, kv := range resp.Kvs {
				r.stored = append(r.stored, fingerprint{maphash.Bytes(r.seed, kv.Key), maphash.Bytes(r.seed, kv.Value)})
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	slices.SortFunc(r.stored, func(a, b fingerprint) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	r.given = make([]uint64, (len(r.stored)+63)/64)
	r.work = make(chan []clientv3.Op, ReplaceWorkers)
	for range max(ReplaceWorkers, 1) {
		r.wg.Add(1)
		go r.writer()
	}
	return r, nil
}

// Stored is how many keys were stored under the prefixes when Replace
// read them.
func (r *Replace) Stored() int { return len(r.stored) }

// find is the index of the stored key whose fingerprint is h, or -1.
func (r *Replace) find(h uint64) int {
	i, ok := slices.BinarySearchFunc(r.stored, h, func(f fingerprint, h uint64) int {
		switch {
		case f.key < h:
			return -1
		case f.key > h:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// Put wants key (under one of the prefixes) to hold value. It returns
// the first error of a write so far.
func (r *Replace) Put(key, value string) error {
	if err := r.failed(); err != nil {
		return err
	}
	if i := r.find(maphash.String(r.seed, key)); i >= 0 {
		if r.given[i/64]&(1<<(i%64)) == 0 {
			r.given[i/64] |= 1 << (i % 64)
			r.nGiven++
		}
		if r.stored[i].val == maphash.String(r.seed, value) {
			r.same++
			return nil
		}
	}
	return r.add(clientv3.OpPut(key, value), len(key)+len(value))
}

// add queues op, sending the batch to a writer when it is full.
func (r *Replace) add(op clientv3.Op, size int) error {
	if len(r.ops) == MaxTxnOps || r.bytes+size > MaxTxnBytes && len(r.ops) > 0 {
		if err := r.send(); err != nil {
			return err
		}
	}
	r.ops = append(r.ops, op)
	r.bytes += size + 16
	return nil
}

func (r *Replace) send() error {
	if len(r.ops) == 0 {
		return r.failed()
	}
	select {
	case r.work <- r.ops:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	r.ops, r.bytes = make([]clientv3.Op, 0, MaxTxnOps), 0
	return r.failed()
}

func (r *Replace) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// writer commits batches until the work ends; after a failure it drops
// the rest.
func (r *Replace) writer() {
	defer r.wg.Done()
	for ops := range r.work {
		if r.failed() != nil {
			continue
		}
		t := r.st.Txn()
		t.ops = ops
		rev, err := t.Commit(r.ctx)
		r.mu.Lock()
		if err != nil {
			if r.err == nil {
				r.err = err
			}
		} else {
			r.res.Revision = max(r.res.Revision, rev)
			for _, op := range ops {
				if op.IsDelete() {
					r.res.Deleted++
				} else {
					r.res.Written++
				}
			}
		}
		r.mu.Unlock()
	}
}

// Close writes what is queued, then deletes every key that was stored
// when Replace read them, was not given to Put and has not been written
// since (a key another writer put meanwhile stays). It returns what was
// done, also with an error (what was written before the failure).
func (r *Replace) Close() (ReplaceResult, error) {
	err := r.send()
	if err == nil && r.nGiven < len(r.stored) {
		err = r.sweep()
		if err == nil {
			err = r.send()
		}
	}
	close(r.work)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Unchanged = r.same
	if r.err != nil {
		err = r.err
	}
	if err != nil {
		return r.res, fmt.Errorf("%w (%d keys written, %d deleted, %d unchanged)", err, r.res.Written, r.res.Deleted, r.res.Unchanged)
	}
	return r.res, nil
}

// sweep queues the deletion of the stored keys not given: read again
// (keys only), those whose fingerprint is not marked and whose last write
// is no newer than the first read.
func (r *Replace) sweep() error {
	for _, p := range r.prefixes {
		end := clientv3.GetPrefixRangeEnd(p)
		for key := p; ; {
			resp, err := r.st.cli.Get(r.ctx, key, clientv3.WithRange(end), clientv3.WithLimit(5*replacePage), clientv3.WithKeysOnly())
			if err != nil {
				return fmt.Errorf("store: reading %s: %w", p, err)
			}
			for _, kv := range resp.Kvs {
				if kv.ModRevision > r.rev {
					continue
				}
				if i := r.find(maphash.Bytes(r.seed, kv.Key)); i >= 0 && r.given[i/64]&(1<<(i%64)) != 0 {
					continue
				}
				if err := r.add(clientv3.OpDelete(string(kv.Key)), len(kv.Key)); err != nil {
					return err
				}
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	return nil
}
