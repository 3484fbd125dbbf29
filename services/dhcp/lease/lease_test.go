package lease_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/testenv"
)

func mk(i int) *lease.Lease {
	return &lease.Lease{
		Kind: lease.V4, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Iface: "v1",
		MAC: fmt.Sprintf("02:00:00:00:%02X:%02X", i>>8, i&0xff), State: lease.Bound,
		Start: time.Unix(1000, 0).UTC(), End: time.Unix(5000, 0).UTC(), CircuitID: "olt1 xpon 0/1/0:5",
	}
}

// TestCommitterGroups shows many concurrent writers share few Applies and
// that the last write to a key in a batch wins.
func TestCommitterGroups(t *testing.T) {
	st := lease.NewMemStore()
	c := lease.NewCommitter(st, 0, slog.Default())
	// Queue everything before the committer runs so it must batch.
	var wg sync.WaitGroup
	errs := make(chan error, 201)
	for i := range 200 {
		wg.Add(1)
		c.Submit([]lease.Op{lease.Put(mk(i))}, func(err error) { errs <- err; wg.Done() })
	}
	l := mk(7)
	l.Hostname = "last"
	wg.Add(1)
	c.Submit([]lease.Op{lease.Put(l)}, func(err error) { errs <- err; wg.Done() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, _ := st.Load(ctx)
	if len(got) != 200 {
		t.Fatalf("stored %d leases, want 200", len(got))
	}
	if st.Applies != 1 {
		t.Errorf("Applies = %d, want 1 (one group commit)", st.Applies)
	}
	for _, g := range got {
		if g.Addr == l.Addr && g.Hostname != "last" {
			t.Errorf("lease %v hostname %q, want the last write", g.Addr, g.Hostname)
		}
	}
}

// A small batch waits for more writes (up to GatherBelow) before it is
// committed, and a lone write still goes once Gather has passed.
func TestCommitterGathers(t *testing.T) {
	st := lease.NewMemStore()
	c := lease.NewCommitter(st, 0, slog.Default())
	c.Gather, c.GatherBelow = time.Hour, 3 // only the count can end the wait
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		c.Submit([]lease.Op{lease.Put(mk(i))}, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
		time.Sleep(10 * time.Millisecond) // arrive one by one
	}
	wg.Wait()
	if st.Applies != 1 {
		t.Errorf("Applies = %d, want 1: three writes arriving one by one gathered", st.Applies)
	}

	c2 := lease.NewCommitter(lease.NewMemStore(), 0, slog.Default())
	c2.Gather, c2.GatherBelow = 5*time.Millisecond, 100
	go c2.Run(ctx)
	if err := c2.Do(ctx, []lease.Op{lease.Put(mk(1))}); err != nil {
		t.Fatal(err)
	}
}

func TestCommitterStopped(t *testing.T) {
	c := lease.NewCommitter(lease.NewMemStore(), 0, slog.Default())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	cancel()
	<-done
	if err := c.Do(context.Background(), []lease.Op{lease.Put(mk(1))}); err != lease.ErrClosed {
		t.Errorf("Do after stop = %v, want ErrClosed", err)
	}
}

// TestEtcdStore writes more leases than one transaction may carry, deletes
// some, and reads them back from a real etcd.
func TestEtcdStore(t *testing.T) {
	kv := testenv.Start(t).KV
	st := lease.NewEtcdStore(kv)
	ctx := context.Background()
	var ops []lease.Op
	var want []lease.Lease
	for i := range 300 {
		ops = append(ops, lease.Put(mk(i)))
		if i%3 != 0 {
			want = append(want, *mk(i))
		}
	}
	if err := st.Apply(ctx, ops); err != nil {
		t.Fatal(err)
	}
	ops = ops[:0]
	for i := 0; i < 300; i += 3 {
		ops = append(ops, lease.Del(mk(i)))
	}
	if err := st.Apply(ctx, ops); err != nil {
		t.Fatal(err)
	}
	got, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]lease.Lease{}
	for _, g := range got {
		byKey[g.Key()] = g
	}
	if len(byKey) != len(want) {
		t.Fatalf("loaded %d leases, want %d", len(byKey), len(want))
	}
	for _, w := range want {
		if diff := cmp.Diff(w, byKey[w.Key()], cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("lease %s (-want +got):\n%s", w.Key(), diff)
		}
	}
	// The key layout is part of the contract with the rest of the platform.
	resp, err := kv.Get(ctx, "/router/dhcp/leases/v4/10.0.0.1")
	if err != nil || len(resp.Kvs) != 1 {
		t.Errorf("lease not under /router/dhcp/leases/v4/10.0.0.1: %v %v", resp, err)
	}
}

func TestTableIndexes(t *testing.T) {
	tb := lease.NewTable()
	a := mk(1)
	tb.Put(a)
	if got := tb.Client(a.ClientKey()); got != a {
		t.Fatalf("Client = %v, want %v", got, a)
	}
	b := mk(2)
	b.MAC = a.MAC // the client moved to another address
	tb.Put(b)
	if got := tb.Client(a.ClientKey()); got != b {
		t.Errorf("Client after move = %v, want the new lease", got)
	}
	tb.Delete(a)
	if got := tb.Client(a.ClientKey()); got != b {
		t.Errorf("deleting the old lease dropped the current one")
	}
	if got, want := tb.Len(), 1; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
}

// BenchmarkEtcdCommit is the cost of making leases durable in a real
// embedded etcd (fsync on), as the engine does for every new client: b.N
// leases submitted by 1,024 concurrent writers through the group committer.
// Report: ns/op is per lease.
func BenchmarkEtcdCommit(b *testing.B) {
	env := testenv.Start(b)
	st := lease.NewEtcdStore(env.KV)
	c := lease.NewCommitter(st, 0, slog.Default())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	b.ResetTimer()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 1024)
	for i := range b.N {
		sem <- struct{}{}
		wg.Add(1)
		c.Submit([]lease.Op{lease.Put(mk(i % 65536))}, func(error) { <-sem; wg.Done() })
	}
	wg.Wait()
}
