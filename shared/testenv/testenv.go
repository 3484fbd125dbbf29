// Package testenv starts what component tests need: an in-process NATS
// server per test, and an embedded etcd (one per package under Main, one
// per test otherwise) in which each test has a keyspace of its own; both
// are let go by t.Cleanup. There is no mock key-value store on purpose.
// It also waits for conditions (Eventually, WaitFor) so that tests do not
// sleep and poll by hand, and makes anonymous network namespaces (Netns).
package testenv

import (
	"log/slog"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
)

// Env is a running bus and store.
type Env struct {
	NATS *server.Server
	NC   *nats.Conn
	// Etcd is the member KV talks to. Under Main other tests use it too:
	// leave stopping it to testenv.
	Etcd *store.Embedded
	// KV sees a keyspace of the test's own (see the function Etcd).
	KV *clientv3.Client
}

// Start starts a NATS server for the test and gives it an etcd keyspace of
// its own; it fails the test when either cannot start.
func Start(t testing.TB) *Env {
	t.Helper()
	ns, nc := startNATS(t, t.TempDir())
	e, pfx := member(t)
	return &Env{NATS: ns, NC: nc, Etcd: e, KV: client(t, e, pfx)}
}

// NATS starts an embedded NATS server alone and connects to it, for tests
// that need the bus but no etcd.
func NATS(t testing.TB) *nats.Conn {
	t.Helper()
	_, nc := startNATS(t, t.TempDir())
	return nc
}

func startNATS(t testing.TB, dir string) (*server.Server, *nats.Conn) {
	t.Helper()
	ns, err := bus.StartEmbedded(bus.EmbedConfig{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := bus.Connect("test", "", ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return ns, nc
}

// Log returns a logger that writes through t.Log, so output shows only for
// failing tests.
func Log(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
