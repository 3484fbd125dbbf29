package store

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// ErrHeld says another process owns the kernel state this one would touch.
var ErrHeld = errors.New("store: lock held by another process")

// Lock is an exclusive claim on a name, held while the process lives: a
// service that owns kernel state takes one so that a second replica refuses
// to start instead of fighting the first.
type Lock struct {
	session *concurrency.Session
	mutex   *concurrency.Mutex
}

// TryLock claims /router/locks/<name> or returns ErrHeld at once. The claim
// lapses 10 s after the holder dies.
func TryLock(ctx context.Context, cli *clientv3.Client, name string) (*Lock, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("store: lock session: %w", err)
	}
	m := concurrency.NewMutex(s, Root+"locks/"+name)
	if err := m.TryLock(ctx); err != nil {
		s.Close()
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, fmt.Errorf("%w: %s", ErrHeld, name)
		}
		return nil, fmt.Errorf("store: lock %s: %w", name, err)
	}
	return &Lock{session: s, mutex: m}, nil
}

// Unlock releases the claim.
func (l *Lock) Unlock(ctx context.Context) error {
	err := l.mutex.Unlock(ctx)
	l.session.Close()
	return err
}
