package store

import (
	"context"
	"errors"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// unlockTimeout bounds the release of a claim when a term ends.
const unlockTimeout = 5 * time.Second

// Hold runs serve for as long as this process holds /router/locks/<name>,
// standing by while another process holds it: the life of a service that
// owns kernel state with one replica active and the others waiting.
//
// Hold claims the lock, or, when another process holds it, logs that it
// stands by and waits for it (Acquire). Then it calls serve with a context
// that is cancelled the moment the claim lapses (Lock.Lost) or ctx ends; a
// serve should write etcd through st.Fenced(l), so that nothing it still
// does after the loss reaches etcd. When serve returns Hold releases the
// claim. After a loss it logs and stands by again, whatever serve returned
// (its error is logged), so a replica cut off from etcd takes over again
// once it can. Hold returns when ctx ends (nil, or serve's error if that is
// not just the context ending), or when serve returns of its own accord
// while the claim still holds (serve's result).
func Hold(ctx context.Context, cli *clientv3.Client, name string, log *slog.Logger, serve func(ctx context.Context, l *Lock) error) error {
	if log == nil {
		log = slog.Default()
	}
	for {
		l, err := claim(ctx, cli, name, log)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		err = term(ctx, l, serve)
		lost := false
		select {
		case <-l.Lost(): // checked before Unlock, which closes it too
			lost = true
		default:
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		_ = l.Unlock(uctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		case lost:
			log.Error("stopped serving: the lock lapsed (etcd unreachable?); standing by to take over again", "lock", name, "err", err)
		default:
			return err
		}
	}
}

// claim takes the lock at once or, when it is held, says so and waits.
func claim(ctx context.Context, cli *clientv3.Client, name string, log *slog.Logger) (*Lock, error) {
	l, err := TryLock(ctx, cli, name)
	if !errors.Is(err, ErrHeld) {
		return l, err
	}
	log.Warn("another replica holds the lock; standing by until it is free", "lock", name)
	if l, err = Acquire(ctx, cli, name); err != nil {
		return nil, err
	}
	log.Info("took over: the lock is ours", "lock", name)
	return l, nil
}

// term is one call of serve, its context cancelled when the claim lapses.
func term(ctx context.Context, l *Lock, serve func(ctx context.Context, l *Lock) error) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.Lost():
			cancel()
		case <-sctx.Done():
		}
	}()
	return serve(sctx, l)
}
