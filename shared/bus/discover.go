package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
)

// ReadySubject is the subject a service answers once all its endpoints
// are subscribed (bus.Serve declares it last).
func ReadySubject(name string) string { return api.SubjectPrefix + "." + name + ".ready" }

// Up reports whether any instance of the named service answers, with every
// endpoint in place, within timeout. (micro's discovery ping answers
// before a service's endpoints are subscribed, so it is not asked.)
func Up(nc *nats.Conn, name string, timeout time.Duration) bool {
	return AskUp(nc, name, timeout)()
}

// AskUp is Up in two halves: the question is sent now, and the function it
// returns waits for the answer (call it once), so a caller can ask it
// alongside other questions without a goroutine of its own.
func AskUp(nc *nats.Conn, name string, timeout time.Duration) func() bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	w, err := publishRequest(ctx, nc, &nats.Msg{Subject: ReadySubject(name)})
	return func() bool {
		defer cancel()
		if err != nil {
			return false
		}
		_, err := w.wait(ctx)
		return err == nil
	}
}

// WaitUp waits until every named service answers discovery or ctx ends,
// and returns the names still not up. A process that starts several
// services uses it so that it announces itself ready only when the API
// can answer from all of them, not with the half-empty status of a
// service still restoring its state.
func WaitUp(ctx context.Context, nc *nats.Conn, names ...string) (missing []string) {
	pending := append([]string(nil), names...)
	for {
		still := pending[:0]
		for _, n := range pending {
			if !Up(nc, n, 200*time.Millisecond) {
				still = append(still, n)
			}
		}
		pending = still
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return pending
		case <-time.After(50 * time.Millisecond):
		}
	}
}
