package slot

import (
	"net/netip"
	"testing"
)

func pool(t *testing.T, s ...string) []netip.Addr {
	t.Helper()
	a, err := ParsePool(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestFormula(t *testing.T) {
	p, err := New(pool(t, "203.0.113.1-203.0.113.3"), 1024, 65535, 2048)
	if err != nil {
		t.Fatal(err)
	}
	// (65535-1024+1)/2048 = 31 blocks an address (512 ports left over),
	// 3 addresses.
	if p.PerIP() != 31 || p.Capacity() != 93 {
		t.Fatalf("per_ip %d capacity %d, want 31 93", p.PerIP(), p.Capacity())
	}
	cases := []struct {
		s          int
		ip         string
		start, end int
	}{
		{0, "203.0.113.1", 1024, 3071},
		{1, "203.0.113.2", 1024, 3071},
		{2, "203.0.113.3", 1024, 3071},
		{3, "203.0.113.1", 3072, 5119},
		{92, "203.0.113.3", 1024 + 30*2048, 1024 + 31*2048 - 1},
	}
	for _, c := range cases {
		m, ok := p.Slot(c.s)
		if !ok || m.Public.String() != c.ip || m.PortStart != c.start || m.PortEnd != c.end {
			t.Errorf("slot %d = %+v %v, want %s %d-%d", c.s, m, ok, c.ip, c.start, c.end)
		}
	}
	if _, ok := p.Slot(93); ok {
		t.Error("slot 93 is past the capacity")
	}
	if _, ok := p.Slot(-1); ok {
		t.Error("slot -1 accepted")
	}
}

// Every slot's every port looks up to that slot, and nothing else does.
func TestLookupInverse(t *testing.T) {
	for _, c := range []struct{ min, max, block int }{
		{1024, 65535, 2048}, // divides
		{1024, 65535, 1000}, // 64512/1000: 512 ports left over
		{1, 65535, 65535},   // one block an address
		{5000, 5009, 3},     // 10 ports, 3 blocks of 3, port 5009 nobody's
		{100, 100, 1},       // one port
	} {
		p, err := New(pool(t, "198.51.100.7", "198.51.100.9-198.51.100.10"), c.min, c.max, c.block)
		if err != nil {
			t.Fatal(err)
		}
		if want := 3 * ((c.max - c.min + 1) / c.block); p.Capacity() != want {
			t.Fatalf("%+v: capacity %d, want %d", c, p.Capacity(), want)
		}
		owner := map[[2]int]int{}
		for s := 0; s < p.Capacity(); s++ {
			m, _ := p.Slot(s)
			i := p.index[m.Public]
			for port := m.PortStart; port <= m.PortEnd; port++ {
				if _, dup := owner[[2]int{i, port}]; dup {
					t.Fatalf("%+v: %s:%d in two slots", c, m.Public, port)
				}
				owner[[2]int{i, port}] = s
				if got, ok := p.Lookup(m.Public, port); !ok || got != s {
					t.Fatalf("%+v: lookup %s:%d = %d %v, want %d", c, m.Public, port, got, ok, s)
				}
			}
			if m.PortEnd > c.max {
				t.Fatalf("%+v: slot %d ends at %d past port_max", c, s, m.PortEnd)
			}
		}
		for _, a := range p.addrs {
			for port := 0; port <= 65535; port++ {
				if _, owned := owner[[2]int{p.index[a], port}]; owned {
					continue
				}
				if s, ok := p.Lookup(a, port); ok {
					t.Fatalf("%+v: %s:%d belongs to nobody but looks up to %d", c, a, port, s)
				}
			}
		}
	}
	p, _ := New(pool(t, "198.51.100.7"), 1024, 65535, 2048)
	if _, ok := p.Lookup(netip.MustParseAddr("198.51.100.8"), 2000); ok {
		t.Error("an address outside the pool looked up")
	}
}

func TestCapacityEdges(t *testing.T) {
	if _, err := New(pool(t, "192.0.2.1"), 1024, 65535, 64513); err == nil {
		t.Error("a block larger than the range accepted")
	}
	if _, err := New(pool(t, "192.0.2.1"), 2000, 1999, 1); err == nil {
		t.Error("a reversed port range accepted")
	}
	if _, err := New(pool(t, "192.0.2.1"), 0, 10, 1); err == nil {
		t.Error("port 0 accepted")
	}
	p, err := New(nil, 1024, 65535, 2048)
	if err != nil || p.Capacity() != 0 {
		t.Fatalf("empty pool: %v %v", p, err)
	}
	if _, ok := p.Slot(0); ok {
		t.Error("an empty pool has a slot")
	}
	// A /22: 1024 addresses x 31 = 31,744 slots.
	p, _ = New(pool(t, "100.64.0.0/22"), 1024, 65535, 2048)
	if p.Capacity() != 31744 {
		t.Errorf("/22 capacity %d", p.Capacity())
	}
	// The default layout with 100,000 subscribers needs blocks of 512 on a /22:
	// 126 an address, 129,024 slots.
	p, _ = New(pool(t, "100.64.0.0/22"), 1024, 65535, 512)
	if p.Capacity() != 129024 {
		t.Errorf("/22 capacity at 512: %d", p.Capacity())
	}
	m, _ := p.Slot(p.Capacity() - 1)
	if m.Public.String() != "100.64.3.255" || m.PortEnd != 1024+126*512-1 {
		t.Errorf("last slot %+v", m)
	}
}

// Adding subscribers (allocating further slots) never changes the mapping
// of one already allocated, and a freed slot is the next one given.
func TestStableUnderAdditions(t *testing.T) {
	p, _ := New(pool(t, "203.0.113.0/30"), 1024, 65535, 4096)
	var a Alloc
	first := map[string]Mapping{}
	for i := 0; i < 10; i++ {
		s, ok := a.Next(p.Capacity())
		if !ok || s != i {
			t.Fatalf("next = %d %v, want %d", s, ok, i)
		}
		first[string(rune('a'+i))], _ = p.Slot(s)
	}
	// Restart: the stored slots are taken back in any order.
	var b Alloc
	for _, s := range []int{7, 2, 9, 0, 1, 3, 4, 5, 6, 8} {
		if !b.Take(s) {
			t.Fatalf("take %d twice", s)
		}
	}
	if b.Take(3) {
		t.Error("a used slot taken again")
	}
	for i := 0; i < 20; i++ {
		if _, ok := b.Next(p.Capacity()); !ok {
			t.Fatal("pool full too early")
		}
	}
	for k, m := range first {
		again, _ := p.Slot(m.Slot)
		if again != m {
			t.Errorf("%s moved: %+v -> %+v", k, m, again)
		}
	}
	if b.UsedBelow(5) != 5 || b.UsedBelow(64) != 30 || b.UsedBelow(65) != 30 || b.UsedBelow(0) != 0 {
		t.Errorf("used below: %d %d %d", b.UsedBelow(5), b.UsedBelow(64), b.UsedBelow(65))
	}
	b.Free(4)
	if b.UsedBelow(5) != 4 {
		t.Errorf("used below 5 after freeing 4: %d", b.UsedBelow(5))
	}
	if s, _ := b.Next(p.Capacity()); s != 4 {
		t.Errorf("after freeing 4, next = %d", s)
	}
	// Full: capacity 4 addresses x 15 = 60.
	for b.Used() < p.Capacity() {
		if _, ok := b.Next(p.Capacity()); !ok {
			t.Fatalf("full at %d of %d", b.Used(), p.Capacity())
		}
	}
	if _, ok := b.Next(p.Capacity()); ok {
		t.Error("a slot past the capacity given")
	}
}

func TestParsePool(t *testing.T) {
	a := pool(t, "203.0.113.1, 203.0.113.5-203.0.113.7", "198.51.100.0/31")
	if got := FormatPool(a); got != "203.0.113.1,203.0.113.5-203.0.113.7,198.51.100.0-198.51.100.1" {
		t.Errorf("format = %q", got)
	}
	for _, bad := range []string{"203.0.113.9-203.0.113.1", "2001:db8::1", "x", "203.0.113.1,203.0.113.1", "1.2.3.4-1.2.3"} {
		if _, err := ParsePool([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	addrs, _ := ParsePool([]string{"100.64.0.0/22"})
	p, _ := New(addrs, 1024, 65535, 512)
	pub := netip.MustParseAddr("100.64.2.17")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := p.Lookup(pub, 1024+i%60000); !ok && i%60000 < 64512 {
			b.Fatal("miss")
		}
	}
}
