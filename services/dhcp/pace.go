package dhcp

import (
	"sync"
	"time"
)

// bucket paces a listener's answers: a token bucket on real time, shared
// by the receive loop (answers from memory) and the pacer (answers released
// by a group commit).
//
// Why pace at all: the peer on a served interface (a relay agent, an OLT,
// a BNG, perfdhcp) drains its socket in turns, and its receive buffer holds
// a couple of hundred datagrams. An engine that was held up (a scheduling
// stall, a CPU quota, a long commit) and then answers its backlog at full
// speed overruns that buffer: measured under a half-core quota at 9k
// DORA/s, every request was answered within 250 ms and yet 1-2% of the
// answers were lost in perfdhcp's socket. A steady stream at a bounded rate
// is drained.
//
// Taking never blocks for less than paceGap: a shorter debt is carried
// into the next take instead of being slept off, so an engine far below the
// rate never sleeps. Time a sleep overshot (under a CPU quota, by whole
// scheduling periods) is credited as tokens, up to burst.
type bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens a second
	burst  float64
	tokens float64 // negative: debt
	last   time.Time
	now    func() time.Time
	sleep  func(time.Duration)
}

func newBucket(rate, burst float64) *bucket {
	return &bucket{rate: rate, burst: burst, tokens: burst, last: time.Now(), now: time.Now, sleep: time.Sleep}
}

// take spends n tokens, sleeping off any debt of paceGap or more.
func (b *bucket) take(n int) {
	b.mu.Lock()
	now := b.now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	debt := time.Duration(-b.tokens / b.rate * float64(time.Second))
	b.mu.Unlock()
	if debt >= paceGap {
		b.sleep(debt)
	}
}
