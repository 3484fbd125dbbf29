package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Backoff bounds for Poll: the first retry comes almost at once (most
// conditions hold within a millisecond or two), later ones no more than
// maxPollGap apart, so a slow condition costs at most that much extra.
const (
	minPollGap = time.Millisecond
	maxPollGap = 50 * time.Millisecond
)

// Eventually calls cond until it returns nil, with a short backoff between
// tries, and fails the test with cond's last error when within has passed
// first. cond runs on the test's goroutine, so it may use t itself.
//
//	testenv.Eventually(t, 5*time.Second, func() error {
//		if n := eng.Listeners(); n < 3 {
//			return fmt.Errorf("%d listeners open, want 3", n)
//		}
//		return nil
//	})
func Eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := Poll(ctx, cond); err != nil {
		t.Fatalf("not so after %v: %v", within, err)
	}
}

// WaitFor is Eventually for a condition that is true or false: it fails
// the test saying what it waited for.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, within, func() error {
		if !cond() {
			return fmt.Errorf("still waiting for %s", what)
		}
		return nil
	})
}

// Poll calls cond until it returns nil or ctx ends; then it returns cond's
// last error. It always tries once more when ctx ends, so a condition that
// became true during the last gap is not reported as failed. It is for
// helpers that must not fail the test themselves (other goroutines, or a
// caller that wants its own message).
func Poll(ctx context.Context, cond func() error) error {
	gap := minPollGap
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if err = cond(); err == nil {
				return nil
			}
			return err
		case <-time.After(gap):
		}
		gap = min(2*gap, maxPollGap)
	}
}
