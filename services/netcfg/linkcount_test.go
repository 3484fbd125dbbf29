package netcfg

import (
	"errors"
	"testing"
	"time"
)

// TestLinkCountReused: the count is listed once per second, again after
// that (or when the clock goes back), and a failed listing is not kept.
func TestLinkCountReused(t *testing.T) {
	var c linkCount
	lists, n := 0, 3
	list := func() (int, error) { lists++; return n, nil }
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		at        time.Duration
		want, lst int
	}{{0, 3, 1}, {500 * time.Millisecond, 3, 1}, {999 * time.Millisecond, 3, 1}, {time.Second, 4, 2}, {-time.Second, 4, 3}} {
		if step.at == time.Second {
			n = 4
		}
		got, err := c.count(t0.Add(step.at), list)
		if err != nil || got != step.want || lists != step.lst {
			t.Fatalf("at %v: %d (%v) after %d listings; want %d after %d", step.at, got, err, lists, step.want, step.lst)
		}
	}
	var c2 linkCount
	if _, err := c2.count(t0, func() (int, error) { return 0, errors.New("dump interrupted") }); err == nil {
		t.Fatal("a failed listing answered")
	}
	if got, _ := c2.count(t0, list); got != 4 {
		t.Fatalf("after a failure: %d, want a fresh listing (4)", got)
	}
}
