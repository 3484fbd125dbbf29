package store_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// terms records the calls of a Hold's serve.
type terms struct {
	mu     sync.Mutex
	n      int
	events chan string
}

func (tr *terms) serve(ctx context.Context, l *store.Lock) error {
	tr.mu.Lock()
	tr.n++
	tr.mu.Unlock()
	tr.events <- "serving"
	<-ctx.Done()
	tr.events <- "stopped"
	return nil
}

func (tr *terms) next(t *testing.T, want string, within time.Duration) {
	t.Helper()
	select {
	case got := <-tr.events:
		if got != want {
			t.Fatalf("serve: got %q, want %q", got, want)
		}
	case <-time.After(within):
		t.Fatalf("serve: no %q within %v", want, within)
	}
}

func (tr *terms) none(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case got := <-tr.events:
		t.Fatalf("serve: unexpected %q", got)
	case <-time.After(within):
	}
}

// Hold serves while it holds the lock, a second Hold stands by meanwhile and
// takes over when the first ends; a holder whose claim lapses stops serving
// at once and stands by again (here it gets the lock back, being alone).
func TestHoldStandsByAndTakesOver(t *testing.T) {
	t.Parallel() // waits on etcd lease expiry; the others need not wait for it
	env := testenv.Start(t)
	log := slog.New(slog.DiscardHandler)
	run := func(tr *terms) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- store.Hold(ctx, env.KV, "t/host", log, tr.serve) }()
		return cancel, done
	}
	a := &terms{events: make(chan string, 4)}
	stopA, doneA := run(a)
	defer stopA()
	a.next(t, "serving", 10*time.Second)

	b := &terms{events: make(chan string, 4)}
	stopB, doneB := run(b)
	defer stopB()
	b.none(t, 500*time.Millisecond)

	stopA()
	a.next(t, "stopped", 10*time.Second)
	if err := <-doneA; err != nil {
		t.Fatalf("Hold A returned %v after its context ended, want nil", err)
	}
	b.next(t, "serving", 10*time.Second)

	revokeClaim(t, env.KV, "t/host")
	b.next(t, "stopped", 15*time.Second) // Lost cancels serve's context
	b.next(t, "serving", 10*time.Second) // and Hold claims the lock again
	b.mu.Lock()
	if b.n != 2 {
		t.Errorf("B served %d terms, want 2", b.n)
	}
	b.mu.Unlock()

	stopB()
	b.next(t, "stopped", 10*time.Second)
	if err := <-doneB; err != nil {
		t.Fatalf("Hold B: %v", err)
	}
}

// A serve that fails while the lock holds ends Hold with its error, and the
// lock is released.
func TestHoldReturnsServesError(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := store.Hold(ctx, env.KV, "t/host", slog.New(slog.DiscardHandler), func(context.Context, *store.Lock) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Hold: err = %v, want serve's", err)
	}
	l, err := store.TryLock(ctx, env.KV, "t/host")
	if err != nil {
		t.Fatalf("lock not released after Hold returned: %v", err)
	}
	_ = l.Unlock(ctx)
}
