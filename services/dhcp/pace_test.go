package dhcp

import (
	"testing"
	"time"
)

// The bucket lets a burst through, makes the next ones wait for their
// tokens, carries debts under paceGap instead of sleeping, and credits the
// time a sleep overshot.
func TestBucket(t *testing.T) {
	clock := time.Unix(0, 0)
	var slept []time.Duration
	b := newBucket(40000, 64)
	b.last, b.now = clock, func() time.Time { return clock }
	b.sleep = func(d time.Duration) { slept = append(slept, d) }

	b.take(64) // the burst
	if len(slept) != 0 {
		t.Fatalf("a burst slept %v", slept)
	}
	b.take(4) // 100 µs of debt: carried, not slept
	if len(slept) != 0 {
		t.Fatalf("a debt under paceGap slept %v", slept)
	}
	b.take(60) // 64 behind: 1.6 ms
	near := func(d, want time.Duration) bool { return d > want-time.Microsecond && d < want+time.Microsecond }
	if len(slept) != 1 || !near(slept[0], 1600*time.Microsecond) {
		t.Fatalf("slept %v, want [1.6ms]", slept)
	}
	clock = clock.Add(50 * time.Millisecond) // the sleep overshot by far
	b.take(64)                               // credited, up to the burst only
	b.take(1)
	if len(slept) != 1 {
		t.Fatalf("after an overshoot the burst should pass at once: slept %v", slept)
	}
	b.take(40) // 41 behind
	if len(slept) != 2 || !near(slept[1], 1025*time.Microsecond) {
		t.Fatalf("slept %v, want a second sleep of 1.025ms", slept)
	}
}
