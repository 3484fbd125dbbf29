package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// A standby's Acquire returns when the holder lets go, not before; a
// standby whose context ends gives up with the context's error.
func TestAcquireWaitsForTheHolder(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	held, err := store.TryLock(ctx, env.KV, "dhcp/host")
	if err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := store.Acquire(short, env.KV, "dhcp/host"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while held, context ending: err = %v, want DeadlineExceeded", err)
	}

	got := make(chan *store.Lock, 1)
	go func() {
		l, err := store.Acquire(ctx, env.KV, "dhcp/host")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("Acquire returned while the lock was held")
	case <-time.After(300 * time.Millisecond):
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l == nil {
			t.Fatal("no lock")
		}
		if _, err := store.TryLock(ctx, env.KV, "dhcp/host"); !errors.Is(err, store.ErrHeld) {
			t.Errorf("TryLock after the standby took over: err = %v, want ErrHeld", err)
		}
		_ = l.Unlock(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return after the holder unlocked")
	}
}

// Lost fires when the claim lapses under its holder (here the lease behind
// it is revoked, as etcd does when the keep-alives stop for LockTTL).
func TestLostFiresWhenTheClaimLapses(t *testing.T) {
	t.Parallel() // waits on etcd lease expiry; the others need not wait for it
	env := testenv.Start(t)
	ctx := context.Background()
	l, err := store.TryLock(ctx, env.KV, "dhcp/host")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	select {
	case <-l.Lost():
		t.Fatal("Lost closed while held")
	default:
	}
	resp, err := env.KV.Get(ctx, store.Root+"locks/dhcp/host", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("lock key: %v %v", resp, err)
	}
	if _, err := env.KV.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(15 * time.Second):
		t.Fatal("Lost did not close after the claim lapsed")
	}
}
