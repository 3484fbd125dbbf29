package store

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Limits of one etcd transaction a bulk writer keeps to: etcd's defaults
// (--max-txn-ops 128, --max-request-bytes 1.5 MiB), so that an external
// etcd left at its defaults takes every batch. The embedded member takes
// EmbeddedTxnOps.
const (
	MaxTxnOps   = 128
	MaxTxnBytes = 1 << 20
)

// EmbeddedTxnOps is the embedded member's limit of operations per
// transaction (StartEmbedded), and how many a Replace puts in one in a
// process running it (TxnOps). A restore of 100,000 clients into an
// emptied router wrote 600,000 keys (500,000 since 69161c3): in transactions of 128, about 4,700
// proposals, each Ready of raft's loop carrying two or three of them to a
// WAL fsync (3.2 s of that loop's 12 s in an execution trace) and every
// writer woken once a transaction on a saturated CPU; in transactions of
// 1,024, two in flight, the restore took 9.4-9.6 s instead of 10.9 s
// (benchrun, shared 2-core machine, one run each).
const EmbeddedTxnOps = 1024

// txnOps is TxnOps.
var txnOps atomic.Int64

func init() { txnOps.Store(MaxTxnOps) }

// TxnOps is how many operations a Replace puts in one transaction:
// MaxTxnOps, or EmbeddedTxnOps once this process has started the
// embedded member (whose process's stores all talk to it; a process
// dialling an external etcd keeps to that etcd's default).
func TxnOps() int { return int(txnOps.Load()) }

// ReplaceWorkers is how many transactions a Replace keeps in flight: etcd
// puts concurrent proposals in one raft batch (one WAL fsync for all), so
// a few writers in parallel store more per second than one after the
// other (500,000 keys in transactions of 125: 7.2 s one at a time, 5.1 s
// with 8 in flight, on the shared 2-core machine of 2026-11-27).
var ReplaceWorkers = 8

// Pages of a Read: etcd counts every key from a page's start to the
// range's end on each read (a read of 10,000 of 500,000 keys visits them
// all: three quarters of the time of reading 500,000 keys in pages of
// 10,000 went to that count), so a range holding many keys is read in
// pages of up to an eighth of it, within replacePageMax keys held.
const (
	replacePage    = 10000
	replacePageMax = 50000
)

// Replace makes the keys under a set of prefixes exactly the pairs given
// to Put, writing only what differs: a key stored with the same value is
// not written again (no new revision, no watch event), a key with
// another value or not stored is put, and a stored key never given is
// deleted at Close. It is how a configuration document replaces an area
// of many keys (100,000 clients with their index keys) without holding
// the document or the stored keys: what it keeps of the stored keys is a
// fingerprint of each key and of its value (16 bytes a key) and a bit
// saying whether it was given (and, with Want, 16 bytes a wanted pair
// until Same).
//
// Fingerprints are 64-bit hashes with a seed of the process: a stored key
// sharing both its key's and its value's fingerprint with another pair,
// about one chance in 10^8 at 500,000 keys, would be taken as unchanged.
//
// The writes are transactions of up to TxnOps operations and
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
	kept   int   // keys given with the value stored
	rev    int64 // the revision the stored keys were read at
	read   bool  // Read has returned
	wanted []fingerprint
	same   bool // Same found nothing to change

	ops    []clientv3.Op
	bytes  int
	txnOps int // operations a transaction
	work   chan []clientv3.Op
	wg     sync.WaitGroup

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
	// Checked is how long Sync's first pass took (with the stored keys'
	// reading beside it); the rest of its time went to the writes.
	Checked time.Duration
}

// Replace starts replacing the keys under prefixes (full keys, e.g.
// s.Key("clients")+"/"). The caller reads the stored keys' fingerprints
// with Read, gives every wanted pair to Put, then calls Close. A caller
// that reads its pairs twice anyway (a check of a document before
// anything is written) can give them to Want on the first pass, while
// Read runs, and skip the second when Same says nothing differs: Sync
// does exactly that for a document read as a stream.
func (s *Store) Replace(ctx context.Context, prefixes ...string) *Replace {
	return &Replace{ctx: ctx, st: s, prefixes: prefixes, seed: maphash.MakeSeed(), txnOps: TxnOps()}
}

// Read reads the fingerprints of the keys stored under the prefixes, a
// page at a time at one revision. It may run beside Want, not beside Put.
func (r *Replace) Read() error {
	for _, p := range r.prefixes {
		end := clientv3.GetPrefixRangeEnd(p)
		page := int64(replacePage)
		for key := p; ; {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(page)}
			if r.rev != 0 {
				opts = append(opts, clientv3.WithRev(r.rev))
			}
			resp, err := r.st.cli.Get(r.ctx, key, opts...)
			if err != nil {
				return fmt.Errorf("store: reading %s: %w", p, err)
			}
			if r.rev == 0 {
				r.rev = resp.Header.Revision
			}
			if key == p {
				page = min(max(page, resp.Count/8), replacePageMax)
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
	slices.SortFunc(r.stored, compareFingerprints)
	r.given = make([]uint64, (len(r.stored)+63)/64)
	r.read = true
	return nil
}

func compareFingerprints(a, b fingerprint) int {
	switch {
	case a.key < b.key:
		return -1
	case a.key > b.key:
		return 1
	case a.val < b.val:
		return -1
	case a.val > b.val:
		return 1
	}
	return 0
}

// Want notes that key is wanted with value, writing nothing (the first
// pass over the pairs: see Same).
func (r *Replace) Want(key, value string) {
	r.wanted = append(r.wanted, fingerprint{maphash.String(r.seed, key), maphash.String(r.seed, value)})
}

// Same says, once Read has returned and every pair was given to Want,
// whether the wanted pairs are exactly the stored ones; then Close does
// nothing more, and Put is not needed. Otherwise every pair is given to
// Put as usual.
func (r *Replace) Same() bool {
	slices.SortFunc(r.wanted, compareFingerprints)
	r.same = r.read && slices.Equal(r.wanted, r.stored)
	r.wanted = nil
	return r.same
}

func (r *Replace) start() {
	if r.work != nil {
		return
	}
	n := r.workers()
	r.work = make(chan []clientv3.Op, n)
	for range n {
		r.wg.Add(1)
		go r.writer()
	}
}

// workers is how many transactions r keeps in flight: ReplaceWorkers of
// MaxTxnOps operations, as many operations in larger ones (the
// operations in flight are held several times over, by the writers, the
// requests, raft's log), but at least two, so that one is proposed while
// the other is applied.
func (r *Replace) workers() int {
	return max(ReplaceWorkers*MaxTxnOps/max(r.txnOps, 1), min(ReplaceWorkers, 2), 1)
}

// Stored is how many keys were stored under the prefixes when Read read
// them.
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

// Put wants key (under one of the prefixes) to hold value, after Read.
// It returns the first error of a write so far.
func (r *Replace) Put(key, value string) error {
	if !r.read {
		return fmt.Errorf("store: replace: Put before Read")
	}
	if err := r.failed(); err != nil {
		return err
	}
	if i := r.find(maphash.String(r.seed, key)); i >= 0 {
		if r.given[i/64]&(1<<(i%64)) == 0 {
			r.given[i/64] |= 1 << (i % 64)
			r.nGiven++
		}
		if r.stored[i].val == maphash.String(r.seed, value) {
			r.kept++
			return nil
		}
	}
	return r.add(clientv3.OpPut(key, value), len(key)+len(value))
}

// add queues op, sending the batch to a writer when it is full.
func (r *Replace) add(op clientv3.Op, size int) error {
	if len(r.ops) >= r.txnOps || r.bytes+size > MaxTxnBytes && len(r.ops) > 0 {
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
	r.start()
	select {
	case r.work <- r.ops:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	r.ops, r.bytes = make([]clientv3.Op, 0, r.txnOps), 0
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
	if r.same {
		return ReplaceResult{Unchanged: len(r.stored)}, nil
	}
	if !r.read {
		return ReplaceResult{}, fmt.Errorf("store: replace closed before the stored keys were read")
	}
	err := r.send()
	if err == nil && r.nGiven < len(r.stored) {
		err = r.sweep()
		if err == nil {
			err = r.send()
		}
	}
	if r.work != nil {
		close(r.work)
		r.wg.Wait()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Unchanged = r.kept
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

// Sync runs a document through r in two passes, as a configuration
// import does. The first pass, with Read beside it, checks the document
// and gives each of its pairs to Want; a document that fails the check
// changes nothing. If the wanted pairs are exactly the stored ones, that
// is all. Otherwise the second pass gives every pair to Put and Close
// deletes the stored keys left out. open gives the document afresh for
// each pass; each reads one pass of it (pass 1 or 2) and hands every pair
// to put. When nothing is stored under the prefixes (a router emptied of
// them, new hardware) there is nothing to compare with: put is nil on
// the first pass, which only checks (the pairs need not be made), and the
// second follows. fail wraps a failure of the store's writes (a Put or
// Close), after which part of the document may be written.
func (r *Replace) Sync(open func() (io.ReadCloser, error), each func(doc io.Reader, pass int, put func(key, value string) error) error, fail func(error) error) (ReplaceResult, error) {
	empty, err := r.none()
	if err != nil {
		return ReplaceResult{}, err
	}
	read := make(chan error, 1)
	want := func(k, v string) error { r.Want(k, v); return nil }
	if empty {
		read <- nil
		want = nil
	} else {
		go func() { read <- r.Read() }()
	}
	run := func(pass int, put func(key, value string) error) error {
		doc, err := open()
		if err != nil {
			return err
		}
		defer doc.Close()
		return each(doc, pass, put)
	}
	t0 := time.Now()
	err = run(1, want)
	if rerr := <-read; err == nil && rerr != nil {
		err = rerr
	}
	checked := time.Since(t0)
	if err == nil && (empty || !r.Same()) {
		err = run(2, func(k, v string) error {
			if err := r.Put(k, v); err != nil {
				return fail(err)
			}
			return nil
		})
	}
	if err != nil {
		r.Abort()
		return ReplaceResult{}, err
	}
	res, err := r.Close()
	res.Checked = checked
	if err != nil {
		return res, fail(err)
	}
	return res, nil
}

// none says whether no key is stored under the prefixes; then r is as
// Read would leave it (nothing stored, as of that revision). A read
// limited to one key still counts the range (100,000 keys: about 20 ms),
// so it stops at the first prefix holding any.
func (r *Replace) none() (bool, error) {
	var rev int64
	for _, p := range r.prefixes {
		opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(p)), clientv3.WithLimit(1), clientv3.WithKeysOnly()}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := r.st.cli.Get(r.ctx, p, opts...)
		if err != nil {
			return false, fmt.Errorf("store: reading %s: %w", p, err)
		}
		if len(resp.Kvs) > 0 {
			return false, nil
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
	}
	r.rev, r.read = rev, true
	return true, nil
}

// Abort stops the writers without writing what is queued or deleting
// anything (a document refused on its second pass).
func (r *Replace) Abort() {
	r.mu.Lock()
	if r.err == nil {
		r.err = errAborted
	}
	r.mu.Unlock()
	if r.work != nil {
		close(r.work)
		r.wg.Wait()
		r.work = nil
	}
}

var errAborted = errors.New("store: replace aborted")
