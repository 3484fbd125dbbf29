package shaper_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/shaper"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

func kind(t *testing.T, err error, want apierr.Kind, field string) {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v, want %v", err, want)
	}
	if got, _ := e.Fields["field"].(string); e.Kind != want || (field != "" && got != field) {
		t.Errorf("error %v (kind %v fields %v), want kind %v field %q", err, e.Kind, e.Fields, want, field)
	}
}

// TestShapeRules: bad input is a 400 naming the field, a taken address or
// an IPv6 prefix overlapping another subscriber's a 409, an unknown
// subscriber's removal a 404, and a change the kernel refuses (a limit
// object of that name made by hand) a 500 that leaves the store and the
// kernel as they were (a new prefix length's maps and rules included). Removal takes every
// object of the subscriber away, its group with the last of its /24;
// shapes.page pages in id order.
func TestShapeRules(t *testing.T) {
	l := newLab(t)
	env := testenv.Start(t)
	svc := start(t, env, l.router)
	ctx := context.Background()
	set := func(s api.Shape) (*api.ShapeAnswer, error) { return bus.Invoke(ctx, env.NC, api.ShaperSet, &s) }
	ok := api.Shape{ID: "a", IP: "10.77.0.10", Prefix6: "2001:db8:77:100::/56", Iface: "sub0", Plan: "p", DownMbps: 20, UpMbps: 10}

	bad := ok
	bad.IP = "10.77.0"
	_, err := set(bad)
	kind(t, err, apierr.KindInvalid, "ip")
	bad = ok
	bad.Iface = "nosuch0"
	_, err = set(bad)
	kind(t, err, apierr.KindInvalid, "iface")
	bad = ok
	bad.Prefix6 = "10.0.0.0/8"
	_, err = set(bad)
	kind(t, err, apierr.KindInvalid, "prefix6")
	bad = ok
	bad.DownMbps = 0
	_, err = set(bad)
	kind(t, err, apierr.KindInvalid, "down_mbps")

	if _, err := set(ok); err != nil {
		t.Fatal(err)
	}
	dup := ok
	dup.ID, dup.Prefix6 = "b", ""
	_, err = set(dup)
	kind(t, err, apierr.KindConflict, "")

	// A prefix inside another subscriber's, or holding it: 409.
	for _, p6 := range []string{"2001:db8:77:100::/64", "2001:db8:77::/48", "2001:db8:77:100::1"} {
		over := api.Shape{ID: "c", IP: "10.77.0.12", Prefix6: p6, Iface: "sub0", Plan: "p", DownMbps: 5, UpMbps: 5}
		_, err = set(over)
		kind(t, err, apierr.KindConflict, "")
	}
	// The kernel refusing: a limit object of that name already there
	// (made by hand); a 500, nothing left of the change.
	testenv.Run(t, l.router, "nft", "add", "limit", "inet", "routerd_shaper", "up-10.77.0.12", "{ rate over 1 bytes/second }")
	settle(t, svc)
	before := kernelState(t, l.router)
	over := api.Shape{ID: "c", IP: "10.77.0.12", Prefix6: "2001:db8:77:200::/56", Iface: "sub0", Plan: "p", DownMbps: 5, UpMbps: 5}
	_, err = set(over)
	kind(t, err, apierr.KindInternal, "")
	if after := kernelState(t, l.router); after != before {
		t.Errorf("a refused change left kernel state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	testenv.Run(t, l.router, "nft", "delete", "limit", "inet", "routerd_shaper", "up-10.77.0.12")
	page, err := bus.Invoke(ctx, env.NC, api.ShaperPage, &api.ShapePageRequest{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if page.Count != 1 || page.Shapes[0].ID != "a" {
		t.Errorf("page after a refused change: %+v", page)
	}

	// Paging, then removal.
	for _, id := range []string{"b", "d"} {
		s := api.Shape{ID: id, IP: "10.77.0." + map[string]string{"b": "20", "d": "30"}[id], Iface: "sub0", Plan: "p", DownMbps: 5, UpMbps: 5}
		if _, err := set(s); err != nil {
			t.Fatal(err)
		}
	}
	p1, err := bus.Invoke(ctx, env.NC, api.ShaperPage, &api.ShapePageRequest{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := bus.Invoke(ctx, env.NC, api.ShaperPage, &api.ShapePageRequest{After: p1.Next, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p1.Count != 2 || p1.Next != "b" || p2.Count != 1 || p2.Shapes[0].ID != "d" || p2.Next != "" {
		t.Errorf("pages: %+v then %+v", p1, p2)
	}
	_, err = bus.Invoke(ctx, env.NC, api.ShaperRemove, &api.ShapeRef{ID: "zz"})
	kind(t, err, apierr.KindNotFound, "")
	for _, id := range []string{"a", "b", "d"} {
		if _, err := bus.Invoke(ctx, env.NC, api.ShaperRemove, &api.ShapeRef{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	// What is left of the removed subscribers' classes is the
	// interface's pool of spares, and nothing names them.
	settle(t, svc)
	if got, want := subClasses(t, l), svc.Spares()["sub0"][0]; got != want {
		t.Errorf("%d subscriber classes left after every removal, want the %d spares:\n%s", got, want,
			testenv.Run(t, l.router, "tc", "class", "show", "dev", "sub0"))
	}
	nft := testenv.Run(t, l.router, "nft", "list", "table", "inet", "routerd_shaper")
	if strings.Contains(nft, "elements") || strings.Contains(nft, "limit up-") {
		t.Errorf("map elements or limit objects left after every removal:\n%s", nft)
	}

}

// TestSparesTaken: a new subscriber takes a spare class (no class is made
// on its way: the classes are the same, one of them now at its rate); the
// idle tending makes the pool whole again after a burst that drains it,
// making classes only then, and removes spares past the maximum after
// many removals; a subscriber moving to another interface leaves
// its class there as a spare.
func TestSparesTaken(t *testing.T) {
	l := newLab(t)
	env := testenv.Start(t)
	svc := start(t, env, l.router)
	ctx := context.Background()
	set := func(id, ip string, down int64) {
		t.Helper()
		s := api.Shape{ID: id, IP: ip, Iface: "sub0", Plan: "p", DownMbps: down, UpMbps: 5}
		if _, err := bus.Invoke(ctx, env.NC, api.ShaperSet, &s); err != nil {
			t.Fatal(err)
		}
	}
	set("first", "10.77.0.2", 7)
	settle(t, svc)
	sp := svc.Spares()["sub0"]
	if sp[0] != sp[1] || sp[0] < 1 {
		t.Fatalf("spares after settling: %v, want the target", sp)
	}
	classes := classIDs(t, l)
	set("second", "10.77.0.3", 13)
	after := classIDs(t, l)
	if strings.Join(after, " ") != strings.Join(classes, " ") {
		t.Errorf("a new subscriber made a class although a spare was there:\nbefore %v\nafter  %v", classes, after)
	}
	if !strings.Contains(testenv.Run(t, l.router, "tc", "class", "show", "dev", "sub0"), "rate 13Mbit") {
		t.Errorf("no class at the new subscriber's rate")
	}
	if got := svc.Spares()["sub0"][0]; got != sp[0]-1 {
		t.Errorf("%d spares after one was taken, want %d", got, sp[0]-1)
	}
	// Drain the pool and more: the ones past it make classes; the idle
	// tending fills the pool again by itself.
	for i := 0; i < sp[1]+3; i++ {
		set(fmt.Sprintf("burst%d", i), fmt.Sprintf("10.77.1.%d", i+1), 3)
	}
	if got := svc.Spares()["sub0"][0]; got != 0 {
		t.Errorf("%d spares after a burst past the pool, want 0", got)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if sp := svc.Spares()["sub0"]; sp[0] != sp[1] {
			return fmt.Errorf("spares %v", sp)
		}
		return nil
	})
	if got, want := subClasses(t, l), sp[1]+sp[1]+5; got != want {
		t.Errorf("%d subscriber classes, want %d (subscribers and spares)", got, want)
	}

	// Removals past the pool's maximum (twice the target + 16): the idle
	// tending removes spares down to it, deleting classes.
	for i := 0; i < 2*sp[1]+20; i++ {
		set(fmt.Sprintf("gone%d", i), fmt.Sprintf("10.77.2.%d", i+1), 3)
	}
	for i := 0; i < 2*sp[1]+20; i++ {
		if _, err := bus.Invoke(ctx, env.NC, api.ShaperRemove, &api.ShapeRef{ID: fmt.Sprintf("gone%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := svc.Spares()["sub0"][0]; got <= 2*sp[1]+16 {
		t.Fatalf("%d spares right after the removals, want over the maximum %d", got, 2*sp[1]+16)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := svc.Spares()["sub0"][0]; got != 2*sp[1]+16 {
			return fmt.Errorf("spares %d, want the maximum %d", got, 2*sp[1]+16)
		}
		return nil
	})
	if got, want := subClasses(t, l), sp[1]+5+2*sp[1]+16; got != want {
		t.Errorf("%d classes after the trimming, want %d (subscribers and spares)", got, want)
	}

	// Moving to another interface: the class left behind is a spare.
	moved := api.Shape{ID: "second", IP: "10.77.0.3", Iface: "up0", Plan: "p", DownMbps: 13, UpMbps: 5}
	had := svc.Spares()["sub0"][0]
	if _, err := bus.Invoke(ctx, env.NC, api.ShaperSet, &moved); err != nil {
		t.Fatal(err)
	}
	if got := svc.Spares()["sub0"][0]; got != had+1 {
		t.Errorf("%d spares on sub0 after a subscriber left it, want %d", got, had+1)
	}

	// A restart's reconcile takes the spares for the shaper's own: no
	// change, no spare made, whatever their rates.
	settle(t, svc)
	sp = svc.Spares()["sub0"]
	before := kernelState(t, l.router)
	res, err := svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Added+res.Changed+res.Removed+res.SparesMade != 0 || len(res.Problems) != 0 {
		t.Errorf("reconcile with spares in the kernel changed it: %+v", res)
	}
	if after := kernelState(t, l.router); after != before {
		t.Errorf("the reconcile changed the kernel:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := svc.Spares()["sub0"]; got != sp {
		t.Errorf("spares after the reconcile %v, want %v", got, sp)
	}
}

// settle brings the spare pools to their target before a comparison of
// kernel states.
func settle(t *testing.T, svc *shaper.Service) {
	t.Helper()
	if err := svc.Settle(); err != nil {
		t.Fatal(err)
	}
}

// classIDs lists the subscriber (and spare) class ids on sub0, sorted.
func classIDs(t *testing.T, l *lab) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(testenv.Run(t, l.router, "tc", "class", "show", "dev", "sub0"), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == "class" && !strings.HasPrefix(f[2], "7264:") {
			out = append(out, f[2])
		}
	}
	slices.Sort(out)
	return out
}

func subClasses(t *testing.T, l *lab) int { return len(classIDs(t, l)) }
