package shaper_test

import (
	"context"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestFullKernelFqCodelLeaves: on a kernel with fq_codel (the VM tier),
// every subscriber class gets an fq_codel leaf, the status says so, and a reconcile puts back a leaf taken away. On a kernel
// without it the test skips, saying the shaper fell back to pfifo.
func TestFullKernelFqCodelLeaves(t *testing.T) {
	l := newLab(t)
	env := testenv.Start(t)
	svc := start(t, env, l.router)
	ctx := context.Background()
	for _, s := range []api.Shape{
		{ID: "a", IP: "10.77.0.10", Iface: "sub0", Plan: "p", DownMbps: 20, UpMbps: 10},
		{ID: "b", IP: "10.77.0.11", Iface: "sub0", Plan: "p", DownMbps: 20, UpMbps: 10},
	} {
		if _, err := bus.Invoke(ctx, env.NC, api.ShaperSet, &s); err != nil {
			t.Fatal(err)
		}
	}
	st, err := bus.Invoke(ctx, env.NC, api.ShaperStatus, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Ifaces[0].Leaf != "fq_codel" {
		t.Skipf("kernel without fq_codel: leaf %q (the VM tier runs this)", st.Ifaces[0].Leaf)
	}
	count := func() int {
		return strings.Count(testenv.Run(t, l.router, "tc", "qdisc", "show", "dev", "sub0"), "fq_codel")
	}
	if n := count(); n != 2 {
		t.Fatalf("%d fq_codel leaves, want 2 (two subscribers)", n)
	}
	testenv.Run(t, l.router, "tc", "qdisc", "del", "dev", "sub0", "parent", "1:b")
	res, err := svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Errorf("after the reconcile %d fq_codel leaves, want 2 (%+v)", n, res)
	}
}
