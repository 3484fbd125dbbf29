package lease

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// ErrClosed is returned to writes submitted after the committer stopped.
var ErrClosed = errors.New("lease committer stopped")

// Committer groups lease writes from many concurrent requests into one
// Store.Apply (group commit): while one batch is being made durable the next
// one fills up, so the cost of a durable write is shared by every answer
// waiting on it and throughput does not fall with the store's latency.
//
// One batch is in flight at a time, which keeps writes to the same key in
// submission order.
type Committer struct {
	store    Store
	maxBatch int
	// Gather and GatherBelow: a batch smaller than GatherBelow ops waits
	// up to Gather for more before it is committed. Each commit has a
	// fixed cost (a raft entry, a WAL write and fsync, a backend
	// transaction) that a lone lease pays whole: at a few thousand new
	// leases a second, with commits of one or two leases, it was most of
	// the engine's CPU. Under load batches fill on their own and never
	// wait. Zero Gather commits at once.
	Gather      time.Duration
	GatherBelow int
	reqs        chan commitReq
	stopped     chan struct{}
	log         *slog.Logger
}

type commitReq struct {
	ops  []Op
	done func(error)
}

// NewCommitter returns a committer over store; maxBatch bounds the ops per
// Apply (the etcd store splits further into transactions of its own limit).
func NewCommitter(store Store, maxBatch int, log *slog.Logger) *Committer {
	if maxBatch <= 0 {
		maxBatch = 4096
	}
	return &Committer{store: store, maxBatch: maxBatch, reqs: make(chan commitReq, 1<<16), stopped: make(chan struct{}), log: log}
}

// Submit queues ops; done is called, from the committer's goroutine, once
// they are durable or failed. done must not block for long.
func (c *Committer) Submit(ops []Op, done func(error)) {
	// The queue is buffered, so a send would succeed even after Run
	// stopped; check first, or the write would wait forever.
	select {
	case <-c.stopped:
		done(ErrClosed)
		return
	default:
	}
	select {
	case c.reqs <- commitReq{ops, done}:
	case <-c.stopped:
		done(ErrClosed)
	}
}

// Do submits ops and waits until they are durable.
func (c *Committer) Do(ctx context.Context, ops []Op) error {
	ch := make(chan error, 1)
	c.Submit(ops, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run commits batches until ctx ends, then fails whatever is still queued.
func (c *Committer) Run(ctx context.Context) error {
	defer func() {
		close(c.stopped)
		for {
			select {
			case r := <-c.reqs:
				r.done(ErrClosed)
			default:
				return
			}
		}
	}()
	var batch []commitReq
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return nil
		case r := <-c.reqs:
			batch = append(batch, r)
		}
		n := len(batch[0].ops)
	fill:
		for n < c.maxBatch {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
				n += len(r.ops)
			default:
				break fill
			}
		}
		if n < c.GatherBelow && c.Gather > 0 {
			batch, n = c.gather(ctx, batch, n)
		}
		ops := dedupe(batch)
		err := c.store.Apply(ctx, ops)
		if err != nil {
			c.log.Error("lease commit failed", "ops", len(ops), "err", err)
		}
		for _, r := range batch {
			r.done(err)
		}
	}
}

// gather adds requests arriving within c.Gather to a small batch, until it
// has c.GatherBelow ops.
func (c *Committer) gather(ctx context.Context, batch []commitReq, n int) ([]commitReq, int) {
	t := time.NewTimer(c.Gather)
	defer t.Stop()
	for n < c.GatherBelow {
		select {
		case r := <-c.reqs:
			batch = append(batch, r)
			n += len(r.ops)
		case <-t.C:
			return batch, n
		case <-ctx.Done():
			return batch, n
		}
	}
	return batch, n
}

// dedupe keeps the last op per key, in order, so one batch never carries
// two writes to one key (etcd refuses a transaction that does).
func dedupe(batch []commitReq) []Op {
	last := make(map[string]int)
	var all []Op
	for _, r := range batch {
		for _, op := range r.ops {
			if i, ok := last[op.Key]; ok {
				all[i].Key = "" // superseded
			}
			last[op.Key] = len(all)
			all = append(all, op)
		}
	}
	out := all[:0]
	for _, op := range all {
		if op.Key != "" {
			out = append(out, op)
		}
	}
	return out
}
