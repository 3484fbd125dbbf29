package vlan

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// The index answers what a scan of every address would: a random set of
// IPv4 and IPv6 prefixes, added and removed, each query checked against
// netip.Prefix.Overlaps over the set, with the interface's own
// addresses left out.
func TestAddrIndexMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	random := func() netip.Prefix {
		if r.IntN(4) == 0 {
			var a [16]byte
			a[0], a[1], a[2] = 0x20, 0x01, byte(r.IntN(4))
			a[3] = byte(r.IntN(4))
			return netip.PrefixFrom(netip.AddrFrom16(a), 16+r.IntN(100))
		}
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(8)), byte(r.IntN(256))})
		return netip.PrefixFrom(a, 8+r.IntN(25))
	}
	x := newAddrIndex()
	x.followed = true
	var all []entry
	for i := 0; i < 3000; i++ {
		e := entry{p: random()}
		if r.IntN(2) == 0 {
			e.link = 1 + r.IntN(20)
		} else {
			e.name = string(rune('a' + r.IntN(20)))
		}
		if i%5 == 4 && len(all) > 0 { // take one out again
			k := r.IntN(len(all))
			x.remove(all[k])
			all = append(all[:k], all[k+1:]...)
			continue
		}
		x.insert(e)
		dup := false
		for _, o := range all {
			dup = dup || o == e
		}
		if !dup {
			all = append(all, e)
		}
		if i%10 != 0 {
			continue
		}
		q, self, name := random(), 1+r.IntN(20), string(rune('a'+r.IntN(20)))
		want := false
		for _, o := range all {
			mine := o.name == name || o.name == "" && o.link == self
			want = want || !mine && o.p.Overlaps(q)
		}
		got, found, ok := x.conflict(q, name, self)
		if !ok || found != want {
			t.Fatalf("query %s (self %d, %s): found %v (%+v), a scan says %v", q, self, name, found, got, want)
		}
		if found && (!got.p.Overlaps(q) || got.name == name || got.name == "" && got.link == self) {
			t.Fatalf("query %s: answered %+v, which does not overlap or is its own", q, got)
		}
	}
	for _, e := range all {
		x.remove(e)
	}
	if x.roots[0].count != 0 || x.roots[1].count != 0 || x.roots[0].child != [2]*node{} {
		t.Errorf("entries left after removing every one: %d %d", x.roots[0].count, x.roots[1].count)
	}
}
