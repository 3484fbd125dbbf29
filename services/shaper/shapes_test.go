package shaper_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"routerd.dev/proto/api"
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
	start(t, env, l.router)
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
	classes := testenv.Run(t, l.router, "tc", "class", "show", "dev", "sub0")
	if strings.TrimSpace(classes) != "" {
		t.Errorf("classes left after every removal:\n%s", classes)
	}
	nft := testenv.Run(t, l.router, "nft", "list", "table", "inet", "routerd_shaper")
	if strings.Contains(nft, "elements") || strings.Contains(nft, "limit up-") {
		t.Errorf("map elements or limit objects left after every removal:\n%s", nft)
	}
}
