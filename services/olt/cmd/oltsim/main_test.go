package main

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"routerd.dev/services/olt/sim"
)

// handler records the addresses run logs.
type handler struct {
	slog.Handler
	addrs chan string
}

func (h handler) Enabled(context.Context, slog.Level) bool { return true }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "telnet" {
			h.addrs <- a.Value.String()
		}
		return true
	})
	return nil
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := handler{Handler: slog.DiscardHandler, addrs: make(chan string, 2)}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, sim.Config{OLTs: []sim.OLTConfig{{}, {}}}, slog.New(h))
	}()
	for range 2 {
		select {
		case addr := <-h.addrs:
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		case <-time.After(10 * time.Second):
			t.Fatal("no OLT address logged")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}
