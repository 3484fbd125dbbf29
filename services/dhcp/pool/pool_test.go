package pool

import (
	"net/netip"
	"testing"
)

func TestBitmapAllocWrapsAndFills(t *testing.T) {
	for _, n := range []uint64{1, 3, 63, 64, 65, 130} {
		b := NewBitmap(n)
		seen := map[uint64]bool{}
		for i := uint64(0); i < n; i++ {
			got, ok := b.Alloc()
			if !ok || seen[got] || got >= n {
				t.Fatalf("n=%d alloc %d = %d, %v (dup %v)", n, i, got, ok, seen[got])
			}
			seen[got] = true
		}
		if _, ok := b.Alloc(); ok {
			t.Errorf("n=%d: allocated past full", n)
		}
		b.Clear(0)
		if got, ok := b.Alloc(); !ok || got != 0 {
			t.Errorf("n=%d: after freeing 0 got %d, %v", n, got, ok)
		}
		if b.Used() != n {
			t.Errorf("n=%d: Used = %d", n, b.Used())
		}
	}
}

func TestBitmapCursorMovesOn(t *testing.T) {
	b := NewBitmap(10)
	a, _ := b.Alloc()
	b.Clear(a)
	if got, _ := b.Alloc(); got == a {
		t.Errorf("just-freed slot %d reused at once; the cursor should move on", a)
	}
}

func TestRange(t *testing.T) {
	for _, tc := range []struct {
		first, last, probe string
		in                 bool
		idx                uint64
	}{
		{"10.0.0.10", "10.0.1.9", "10.0.0.10", true, 0},
		{"10.0.0.10", "10.0.1.9", "10.0.1.9", true, 255},
		{"10.0.0.10", "10.0.1.9", "10.0.1.10", false, 0},
		{"10.0.0.10", "10.0.1.9", "10.0.0.9", false, 0},
		{"2001:db8::1000", "2001:db8::ffff", "2001:db8::1001", true, 1},
		{"2001:db8::1000", "2001:db8::ffff", "10.0.0.1", false, 0},
	} {
		r := NewRange(netip.MustParseAddr(tc.first), netip.MustParseAddr(tc.last))
		i, ok := r.Index(netip.MustParseAddr(tc.probe))
		if ok != tc.in || (ok && i != tc.idx) {
			t.Errorf("%s-%s Index(%s) = %d, %v; want %d, %v", tc.first, tc.last, tc.probe, i, ok, tc.idx, tc.in)
		}
		if ok && r.Addr(i).String() != tc.probe {
			t.Errorf("Addr(%d) = %v, want %s", i, r.Addr(i), tc.probe)
		}
	}
}
