package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// revokeClaim makes the claim on name lapse as it does when its holder
// stops answering for LockTTL: the lease behind it (the first claimant, the
// holder) is revoked.
func revokeClaim(t *testing.T, cli *clientv3.Client, name string) {
	t.Helper()
	ctx := context.Background()
	resp, err := cli.Get(ctx, store.Root+"locks/"+name, clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("lock key of %s: %v %v", name, resp, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
}

// A holder whose claim lapsed cannot write through its fenced store once
// another holder took the lock: its commit is refused with ErrLockLost and
// changes nothing, while the new holder's writes go through. A plain
// revision conflict under a lock still held stays ErrConflict.
func TestFencedStoreRefusesALapsedHolder(t *testing.T) {
	t.Parallel() // waits on etcd lease expiry; the others need not wait for it
	env := testenv.Start(t)
	ctx := context.Background()
	key := store.New(env.KV, "t").Key("docs", "a")

	lockA, err := store.TryLock(ctx, env.KV, "t/host")
	if err != nil {
		t.Fatal(err)
	}
	a := store.New(env.KV, "t").Fenced(lockA)
	rev, err := a.Txn().Put(key, doc{"a", 1}).Commit(ctx)
	if err != nil {
		t.Fatalf("holder A writes: %v", err)
	}
	if _, err := a.Txn().IfRevision(key, rev-1).Put(key, doc{"a", 9}).Commit(ctx); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("A, stale revision, lock held: err = %v, want ErrConflict", err)
	}

	revokeClaim(t, env.KV, "t/host")
	lockB, err := store.Acquire(ctx, env.KV, "t/host")
	if err != nil {
		t.Fatal(err)
	}
	defer lockB.Unlock(ctx)
	b := store.New(env.KV, "t").Fenced(lockB)

	// A has not necessarily noticed (Lost may not have fired yet); etcd
	// refuses it all the same.
	if _, err := a.Txn().Put(key, doc{"a", 2}).Put(key+"x", doc{"x", 2}).Commit(ctx); !errors.Is(err, store.ErrLockLost) {
		t.Fatalf("A after losing the lock: err = %v, want ErrLockLost", err)
	}
	// Lost or conflicting, a lost fence is reported as such.
	if _, err := a.Txn().IfRevision(key, rev-1).Delete(key).Commit(ctx); !errors.Is(err, store.ErrLockLost) {
		t.Fatalf("A after losing the lock, stale revision too: err = %v, want ErrLockLost", err)
	}
	got, gotRev, err := store.Get[doc](ctx, b, key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{"a", 1}, got); diff != "" || gotRev != rev {
		t.Errorf("after A's refused writes, revision %d (want %d), document (-want +got):\n%s", gotRev, rev, diff)
	}
	if n, err := b.Count(ctx, key+"x"); err != nil || n != 0 {
		t.Errorf("A's refused transaction wrote part of itself: count %d, %v", n, err)
	}

	if _, err := b.Txn().IfRevision(key, rev).Put(key, doc{"b", 3}).Commit(ctx); err != nil {
		t.Fatalf("holder B writes: %v", err)
	}
	got, _, err = store.Get[doc](ctx, a, key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{"b", 3}, got); diff != "" {
		t.Errorf("after B's write (-want +got):\n%s", diff)
	}

	// Released, B's fenced store refuses too; an unfenced store is unaffected.
	if err := lockB.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Txn().Delete(key).Commit(ctx); !errors.Is(err, store.ErrLockLost) {
		t.Fatalf("B after Unlock: err = %v, want ErrLockLost", err)
	}
	if _, err := store.New(env.KV, "t").Txn().Delete(key).Commit(ctx); err != nil {
		t.Fatalf("unfenced: %v", err)
	}
}
