package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// ErrHeld says another process owns the kernel state this one would touch.
var ErrHeld = errors.New("store: lock held by another process")

// Lock is an exclusive claim on a name, held while the process lives: a
// service that owns kernel state takes one so that a second replica stands
// by (Hold, Acquire) or refuses to start (TryLock) instead of fighting the
// first. Holding the claim is enforced on writes, not only assumed: a
// Store.Fenced(l) writes only while l still holds.
type Lock struct {
	session *concurrency.Session
	mutex   *concurrency.Mutex
	// key and rev name this claim in etcd: the waiter key concurrency.Mutex
	// wrote under the lock's prefix and its create revision. They are
	// copied at acquisition (the mutex clears its own on Unlock) and never
	// change, so fence reads them without a lock.
	key string
	rev int64
}

// LockTTL is how long a claim outlives a holder that died (or lost etcd).
const LockTTL = 10 * time.Second

// TryLock claims /router/locks/<name> or returns ErrHeld at once. The claim
// lapses LockTTL after the holder dies.
func TryLock(ctx context.Context, cli *clientv3.Client, name string) (*Lock, error) {
	s, err := newSession(ctx, cli)
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(s, Root+"locks/"+name)
	if err := m.TryLock(ctx); err != nil {
		s.Close()
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, fmt.Errorf("%w: %s", ErrHeld, name)
		}
		return nil, fmt.Errorf("store: lock %s: %w", name, err)
	}
	return newLock(s, m), nil
}

// Acquire claims /router/locks/<name>, waiting while another process holds
// it: a standby replica returns from here when the holder releases the claim
// or dies (LockTTL later). It returns ctx's error when ctx ends first.
func Acquire(ctx context.Context, cli *clientv3.Client, name string) (*Lock, error) {
	s, err := newSession(ctx, cli)
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(s, Root+"locks/"+name)
	if err := m.Lock(ctx); err != nil {
		s.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("store: lock %s: %w", name, err)
	}
	return newLock(s, m), nil
}

func newLock(s *concurrency.Session, m *concurrency.Mutex) *Lock {
	owner := m.IsOwner()
	return &Lock{session: s, mutex: m, key: m.Key(), rev: owner.GetCompare().GetCreateRevision()}
}

// fence is the condition "this claim still holds": the claim's key exists
// with the create revision it had when it was acquired. A lapsed claim's key
// is deleted with its lease, and a new claim is a new key, so the compare
// fails from the moment another process could hold the lock.
func (l *Lock) fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
}

// Fence is that condition for writers that build their own etcd
// transactions (the DHCP lease committer): put it in the transaction's If,
// and a failed transaction means the lock no longer holds.
func (l *Lock) Fence() clientv3.Cmp { return l.fence() }

func newSession(ctx context.Context, cli *clientv3.Client) (*concurrency.Session, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(LockTTL/time.Second)), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("store: lock session: %w", err)
	}
	return s, nil
}

// Lost is closed when the claim has lapsed while held: etcd stopped
// answering the keep-alives for LockTTL (so another replica may hold it
// now), or the claim was revoked. A holder stops touching what the lock
// guards when it fires. Unlock closes it too.
func (l *Lock) Lost() <-chan struct{} { return l.session.Done() }

// Unlock releases the claim.
func (l *Lock) Unlock(ctx context.Context) error {
	err := l.mutex.Unlock(ctx)
	l.session.Close()
	return err
}
