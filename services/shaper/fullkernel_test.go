package shaper_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestFullKernelFqCodelLeaves: on a kernel with fq_codel (the VM tier),
// every subscriber class and every spare class gets an fq_codel leaf, the
// status says so, and a reconcile puts back a leaf taken away. On a kernel
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
	settle(t, svc)
	spares := svc.Spares()["sub0"][0]
	count := func() int {
		return strings.Count(testenv.Run(t, l.router, "tc", "qdisc", "show", "dev", "sub0"), "fq_codel")
	}
	if n := count(); n != 2+spares {
		t.Fatalf("%d fq_codel leaves, want %d (two subscribers, %d spares)", n, 2+spares, spares)
	}
	// The leaf of subscriber a's class (the class its down4 element names)
	// taken away.
	m := regexp.MustCompile(`10\.77\.0\.10 : ([0-9a-f]+:[0-9a-f]+)`).FindStringSubmatch(
		testenv.Run(t, l.router, "nft", "list", "map", "inet", "routerd_shaper", "down4"))
	if m == nil {
		t.Fatal("no down4 element for 10.77.0.10")
	}
	testenv.Run(t, l.router, "tc", "qdisc", "del", "dev", "sub0", "parent", m[1])
	if n := count(); n != 1+spares {
		t.Fatalf("%d fq_codel leaves after deleting one, want %d", n, 1+spares)
	}
	res, err := svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2+spares || res.Changed != 1 {
		t.Errorf("after the reconcile %d fq_codel leaves, want %d, and one change (%+v)", n, 2+spares, res)
	}
}
