package lease_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// An engine whose host lock lapsed cannot write leases over those of the
// engine that took over: its commits are refused and write nothing.
func TestFencedLeaseStoreRefusesALapsedHolder(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	a, err := store.TryLock(ctx, env.KV, "dhcp/host")
	if err != nil {
		t.Fatal(err)
	}
	sa := lease.NewEtcdStore(env.KV).Fenced(a.Fence())
	l := lease.Lease{Kind: lease.V4, Addr: netip.MustParseAddr("10.0.0.5"), Iface: "sub0", MAC: "02:00:00:00:00:01", State: lease.Bound}
	if err := sa.Apply(ctx, []lease.Op{{Key: l.Key(), Lease: &l}}); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	resp, err := env.KV.Get(ctx, store.Root+"locks/dhcp/host", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("lock key: %v %v", resp, err)
	}
	if _, err := env.KV.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	b, err := store.TryLock(ctx, env.KV, "dhcp/host")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	l2 := l
	l2.MAC = "02:00:00:00:00:99"
	if err := sa.Apply(ctx, []lease.Op{{Key: l2.Key(), Lease: &l2}}); !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("lapsed holder's write: %v, want ErrFenced", err)
	}
	got, err := lease.NewEtcdStore(env.KV).Load(ctx)
	if err != nil || len(got) != 1 || got[0].MAC != l.MAC {
		t.Fatalf("leases after the refused write: %+v %v, want the first one unchanged", got, err)
	}
	if err := lease.NewEtcdStore(env.KV).Fenced(b.Fence()).Apply(ctx, []lease.Op{{Key: l2.Key(), Lease: &l2}}); err != nil {
		t.Fatalf("new holder's write: %v", err)
	}
}
