package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

type doc struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

func TestTxnAndList(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	s := store.New(env.KV, "t")

	if _, err := s.Txn().IfAbsent(s.Key("docs", "a")).Put(s.Key("docs", "a"), doc{"a", 1}).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A second create of the same key must conflict and write nothing.
	_, err := s.Txn().IfAbsent(s.Key("docs", "a")).Put(s.Key("docs", "a"), doc{"a", 2}).Put(s.Key("docs", "b"), doc{"b", 2}).Commit(ctx)
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: err = %v, want ErrConflict", err)
	}
	got, rev, err := store.Get[doc](ctx, s, s.Key("docs", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc{"a", 1}, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	// Optimistic concurrency: a write against a stale revision fails.
	if _, err := s.Txn().IfRevision(s.Key("docs", "a"), rev).Put(s.Key("docs", "a"), doc{"a", 3}).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn().IfRevision(s.Key("docs", "a"), rev).Put(s.Key("docs", "a"), doc{"a", 4}).Commit(ctx); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale write: err = %v, want ErrConflict", err)
	}
	if _, _, err := store.Get[doc](ctx, s, s.Key("docs", "b")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get b: err = %v, want ErrNotFound", err)
	}

	// A damaged document is named, not skipped.
	if _, err := env.KV.Put(ctx, s.Key("docs", "z"), "{not json"); err != nil {
		t.Fatal(err)
	}
	_, err = store.List[doc](ctx, s, s.Key("docs")+"/")
	var broken *store.BrokenError
	if !errors.As(err, &broken) {
		t.Fatalf("List with a damaged doc: err = %v, want BrokenError", err)
	}
	if diff := cmp.Diff([]string{"t/docs/z"}, broken.BrokenDocuments()); diff != "" {
		t.Errorf("broken documents (-want +got):\n%s", diff)
	}
}

func TestTryLockRefusesSecondHolder(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	l, err := store.TryLock(ctx, env.KV, "netcfg")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.TryLock(ctx, env.KV, "netcfg"); !errors.Is(err, store.ErrHeld) {
		t.Fatalf("second TryLock: err = %v, want ErrHeld", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := store.TryLock(ctx, env.KV, "netcfg")
	if err != nil {
		t.Fatalf("TryLock after unlock: %v", err)
	}
	_ = l2.Unlock(ctx)
}
