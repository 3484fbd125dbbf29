package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Two tests' clients share the member but not their keys, watches or
// locks: each sees only what it wrote, under the names it wrote.
func TestEtcdKeyspaces(t *testing.T) {
	ctx := context.Background()
	a, b := testenv.Etcd(t), testenv.Start(t).KV
	if a.Ctx() == b.Ctx() {
		t.Fatal("one client for two keyspaces")
	}
	wch := b.Watch(ctx, "/router/", clientv3.WithPrefix())
	if _, err := a.Put(ctx, "/router/x/1", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "/router/x/1", "b"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cli  *clientv3.Client
		want string
	}{{a, "a"}, {b, "b"}} {
		resp, err := c.cli.Get(ctx, "/router/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != "/router/x/1" || string(resp.Kvs[0].Value) != c.want {
			t.Errorf("keyspace %s sees %v", c.want, resp.Kvs)
		}
	}
	select {
	case wr := <-wch:
		if len(wr.Events) != 1 || string(wr.Events[0].Kv.Key) != "/router/x/1" || string(wr.Events[0].Kv.Value) != "b" {
			t.Errorf("watch saw %v, want only b's own put", wr.Events)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch saw nothing")
	}

	// A lock held in one keyspace does not exist in the other.
	l, err := store.TryLock(ctx, a, "dhcp/host")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	l2, err := store.TryLock(ctx, b, "dhcp/host")
	if err != nil {
		t.Fatalf("lock of another keyspace held: %v", err)
	}
	defer l2.Unlock(ctx)
	if _, err := store.TryLock(ctx, a, "dhcp/host"); !errors.Is(err, store.ErrHeld) {
		t.Errorf("second lock in the same keyspace: %v, want ErrHeld", err)
	}
}

// A test starts with an empty keyspace whatever ran before it.
func TestEtcdStartsEmpty(t *testing.T) {
	for i := range 2 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			kv := testenv.Etcd(t)
			resp, err := kv.Get(context.Background(), "", clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) != 0 {
				t.Fatalf("new keyspace holds %v", resp.Kvs)
			}
			if _, err := kv.Put(context.Background(), "/router/left", "behind"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPoll(t *testing.T) {
	n := 0
	testenv.Eventually(t, 5*time.Second, func() error {
		if n++; n < 5 {
			return fmt.Errorf("try %d", n)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := testenv.Poll(ctx, func() error { return errors.New("never") })
	if err == nil || err.Error() != "never" {
		t.Errorf("Poll of a false condition = %v, want its last error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Poll overran its context by %v", d)
	}
}
