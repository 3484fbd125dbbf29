package bus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
)

// TestChangeResponderGone: a change is sent once, so a caller whose
// replica dies holding it used to wait out the operation's whole timeout
// (3 minutes for POST /plans; a split-deployment test saw it). The
// responder's progress messages bound that: a change that outlasts
// ProgressLive on a live replica is answered, and one whose replica goes
// (its connection closed, as a kill -9 leaves it) is a 503 within
// ProgressLive of its last progress, not after the timeout.
func TestChangeResponderGone(t *testing.T) {
	ns, err := bus.StartEmbedded(bus.EmbedConfig{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	connect := func(name string) *nats.Conn {
		nc, err := bus.Connect(name, "", ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	caller, replica := connect("caller"), connect("replica")
	slow := api.Define[thing, thingAnswer](api.Meta{Service: "test", Name: "things.slow", Summary: "slow", Timeout: time.Minute})
	started, release, ended := make(chan string, 2), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(ended) })
	serve(t, replica, bus.Bind(slow, func(ctx context.Context, in *thing) (*thingAnswer, error) {
		started <- in.Name
		if in.Name == "alive" {
			<-release
		} else {
			select { // held until the test ends: its replica is gone
			case <-ctx.Done():
			case <-ended:
			}
		}
		return &thingAnswer{Thing: *in}, nil
	}))

	t0 := time.Now()
	go func() {
		<-started
		time.Sleep(bus.ProgressLive + 2*bus.ProgressEvery)
		close(release)
	}()
	if a, err := bus.Invoke(context.Background(), caller, slow, &thing{Name: "alive"}); err != nil || a.Thing.Name != "alive" {
		t.Fatalf("a change outlasting ProgressLive on a live replica: %v %v", a, err)
	}
	if took := time.Since(t0); took < bus.ProgressLive {
		t.Fatalf("answered in %s, before ProgressLive: the test proves nothing", took)
	}

	done := make(chan error, 1)
	go func() {
		_, err := bus.Invoke(context.Background(), caller, slow, &thing{Name: "gone"})
		done <- err
	}()
	<-started
	time.Sleep(2 * bus.ProgressEvery) // a few progress messages heard
	replica.Close()
	gone := time.Now()
	select {
	case err := <-done:
		var ae *apierr.Error
		if !errors.As(err, &ae) || ae.Kind != apierr.KindUnavailable || !strings.Contains(ae.Message, "stopped answering") {
			t.Errorf("a change whose replica went: %v, want a 503 saying it stopped answering", err)
		}
		if took := time.Since(gone); took > bus.ProgressLive+2*bus.ProgressEvery {
			t.Errorf("the 503 came %s after the replica went", took)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer 30 s after the replica went (the operation's timeout is a minute)")
	}
}
