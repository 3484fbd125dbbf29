package bus

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// A request's answer comes back on a reply subscription of the caller's
// own, which the connection's read loop delivers to straight into the
// channel the caller waits on. nats.go's request mux (RequestMsg) passes
// every answer through one more goroutine, its mux subscription's, on the
// way: one more hand-off per answer, and on an idle machine each hand-off
// wakes a sleeping thread (measured in the Measured section of
// docs/ARCHITECTURE.md). The subscriptions are kept in a pool per
// connection: one is taken per request in flight, so a quiet process holds
// a handful and a busy one at most maxIdleReplies beyond its peak.

// maxIdleReplies bounds the idle reply subscriptions kept per connection.
const maxIdleReplies = 64

// noRespondersStatus is the status NATS answers a request with when
// nothing serves its subject (nats.go's own constant is not exported).
const noRespondersStatus = "503"

// replySlot is one reply subscription. A request answers on
// prefix+sequence, so an answer that arrives for an earlier request of
// the slot is recognised and dropped.
type replySlot struct {
	sub    *nats.Subscription
	ch     chan *nats.Msg
	prefix string
	seq    uint64
}

type replyPool struct {
	nc   *nats.Conn
	mu   sync.Mutex
	idle []*replySlot
}

// pools holds one pool per connection; a closed connection's is dropped
// when the next pool is made.
var pools sync.Map // *nats.Conn -> *replyPool

func poolOf(nc *nats.Conn) *replyPool {
	if p, ok := pools.Load(nc); ok {
		return p.(*replyPool)
	}
	pools.Range(func(k, _ any) bool {
		if k.(*nats.Conn).IsClosed() {
			pools.Delete(k)
		}
		return true
	})
	p, _ := pools.LoadOrStore(nc, &replyPool{nc: nc})
	return p.(*replyPool)
}

func (p *replyPool) get() (*replySlot, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	inbox := p.nc.NewInbox()
	// Room for stray answers and progress besides the awaited answer:
	// delivery never blocks the read loop (a full channel would drop the
	// message).
	s := &replySlot{ch: make(chan *nats.Msg, 4), prefix: inbox + "."}
	var err error
	if s.sub, err = p.nc.ChanSubscribe(inbox+".*", s.ch); err != nil {
		return nil, err
	}
	return s, nil
}

// put keeps s for the next request. (It does not ask whether the
// connection is closed: that takes the connection's lock, which nats.go's
// flusher holds while it writes, and would stall the caller just answered.
// A closed connection's pool goes with the connection, see poolOf.)
func (p *replyPool) put(s *replySlot) {
	p.mu.Lock()
	if len(p.idle) < maxIdleReplies {
		p.idle = append(p.idle, s)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = s.sub.Unsubscribe()
}

// waiter is a request published and its answer not yet read.
type waiter struct {
	p     *replyPool
	s     *replySlot
	reply string
}

// publishRequest publishes msg with a reply subject of its own; wait
// reads the answer.
func publishRequest(ctx context.Context, nc *nats.Conn, msg *nats.Msg) (*waiter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := poolOf(nc)
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	s.seq++
	msg.Reply = s.prefix + strconv.FormatUint(s.seq, 10)
	if err := nc.PublishMsg(msg); err != nil {
		p.put(s)
		return nil, err
	}
	return &waiter{p: p, s: s, reply: msg.Reply}, nil
}

// errGone is a request whose responder said it was working on it (a
// progress message) and then went silent for ProgressLive: its replica
// died or was cut off while holding it.
var errGone = errors.New("bus: the responder stopped answering")

// wait waits for the answer until ctx ends. Its errors are those of
// nats.go's RequestMsgWithContext: nats.ErrNoResponders when nothing
// serves the subject, ctx.Err() when no answer came in time; and errGone
// when progress messages (ProgressHeader) came and then stopped for
// ProgressLive: a responder sends one when it starts on the request and
// one every ProgressEvery while it works, so its silence means it is
// gone. Before the first progress message (the request still queued at
// the responder, or a responder that sends none) only ctx bounds it.
func (w *waiter) wait(ctx context.Context) (*nats.Msg, error) {
	var live <-chan time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case m := <-w.s.ch:
			if m.Subject != w.reply {
				continue // a second answer, or progress, of an earlier request
			}
			if m.Header.Get(ProgressHeader) != "" {
				if timer == nil {
					timer = time.NewTimer(ProgressLive)
					live = timer.C
				} else {
					timer.Reset(ProgressLive)
				}
				continue
			}
			w.p.put(w.s)
			if len(m.Data) == 0 && m.Header.Get("Status") == noRespondersStatus {
				return nil, nats.ErrNoResponders
			}
			return m, nil
		case <-live:
			_ = w.s.sub.Unsubscribe() // an answer may still come: the slot is not used again
			return nil, errGone
		case <-ctx.Done():
			// Its answer may still come: the slot is not used again.
			_ = w.s.sub.Unsubscribe()
			return nil, ctx.Err()
		}
	}
}
