package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"

	"routerd.dev/shared/store"
)

// shared is the package run's one embedded etcd. It is package state on
// purpose: a test binary is one package, and starting etcd once per package
// instead of once per test is the point. Main turns it on and stops it.
var shared struct {
	mu   sync.Mutex
	on   bool // Main runs this package: tests share one etcd
	etcd *store.Embedded
	dir  string
	err  error // why the shared etcd could not start, told to every test
	seq  int   // numbers the per-test key prefixes
}

// Main runs a package's tests with one embedded etcd for all of them,
// started by the first test that asks for one and stopped when the tests
// are done. Each test still sees a keyspace of its own (see Etcd). Use it
// from the package's TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Without it, Start and Etcd start a private etcd for every test, as
// before: slower, equally isolated.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.on = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	if shared.etcd != nil {
		shared.etcd.Close()
		os.RemoveAll(shared.dir)
		shared.etcd = nil
	}
	shared.on = false
	shared.mu.Unlock()
	os.Exit(code)
}

// Etcd returns a client of an embedded etcd whose keys, watches and leases
// live under a prefix of the test's own: a service that reads and writes
// /router/... and takes locks under /router/locks/ sees an empty store of
// its own and none of the other tests' keys, although (under Main) they
// share one etcd member. Revisions are the member's, so they are
// increasing but not consecutive within a test. The client is closed and
// the test's keys deleted in t.Cleanup.
func Etcd(t testing.TB) *clientv3.Client {
	t.Helper()
	e, pfx := member(t)
	return client(t, e, pfx)
}

// client is a client of e whose keys, watches and leases live under pfx.
func client(t testing.TB, e *store.Embedded, pfx string) *clientv3.Client {
	cli := e.Client()
	// v3client builds its Client from interface values; swapping them for
	// prefixed ones is how the etcd proxy namespaces a client too.
	cli.KV = namespace.NewKV(cli.KV, pfx)
	cli.Watcher = namespace.NewWatcher(cli.Watcher, pfx)
	cli.Lease = namespace.NewLease(cli.Lease, pfx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = cli.Delete(ctx, "", clientv3.WithPrefix()) // "" is the prefix itself
		cli.Close()
	})
	return cli
}

// member returns the etcd a test uses, and the test's key prefix.
func member(t testing.TB) (*store.Embedded, string) {
	t.Helper()
	shared.mu.Lock()
	shared.seq++
	// The number makes the prefix unique and keeps one from being the
	// start of another; the name is for whoever reads a dump.
	pfx := fmt.Sprintf("/testenv/%d-%s/", shared.seq, strings.ReplaceAll(t.Name(), "/", "_"))
	on := shared.on
	if on && shared.etcd == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "testenv-etcd-")
		if shared.err == nil {
			shared.etcd, shared.err = store.StartEmbedded(context.Background(), store.EmbedConfig{Dir: shared.dir})
			if shared.err != nil {
				os.RemoveAll(shared.dir)
			}
		}
	}
	e, err := shared.etcd, shared.err
	shared.mu.Unlock()
	if !on {
		e, err = store.StartEmbedded(context.Background(), store.EmbedConfig{Dir: t.TempDir()})
		if err == nil {
			t.Cleanup(e.Close)
		}
	}
	if err != nil {
		t.Fatalf("testenv: etcd: %v", err)
	}
	return e, pfx
}
