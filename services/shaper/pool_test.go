package shaper

import "testing"

// TestSlotsAvoidLeafBucket: groups are handed out lowest first, 256 classes
// each, skipping the majors whose qdisc would hash into bucket 0 of the
// device's qdisc hash with HTB's default leaves (2, 21, 42, 63, 82, 84,
// ...: hash_32(g<<16, 4) == 0); freed slots are handed out again.
func TestSlotsAvoidLeafBucket(t *testing.T) {
	for _, g := range []uint16{2, 21, 42, 63, 82, 84, 103} {
		if !behindLeaves(g) {
			t.Errorf("group %d not noted as behind the leaves", g)
		}
	}
	for _, g := range []uint16{1, 3, 4, 20, 22, 85} {
		if behindLeaves(g) {
			t.Errorf("group %d noted as behind the leaves", g)
		}
	}
	is := &ifaceS{k: &ifaceK{name: "x"}, bins: map[uint16]*bin{}}
	groups := map[uint16]int{}
	for i := 0; i < 30000; i++ {
		b, cid, fresh, err := is.slot()
		if err != nil {
			t.Fatal(err)
		}
		if fresh {
			is.bins[b.g] = b
		}
		g := uint16(cid >> 16)
		if behindLeaves(g) || !validClass(cid) {
			t.Fatalf("slot %x:%x", g, cid&0xffff)
		}
		is.claim(cid, true)
		groups[g]++
	}
	if len(groups) != (30000+255)/256 || groups[1] != 256 || groups[3] != 256 {
		t.Errorf("%d groups (group 1: %d, group 3: %d), want %d groups of 256", len(groups), groups[1], groups[3], (30000+255)/256)
	}
	is.release(3<<16|7, true)
	if _, cid, fresh, _ := is.slot(); fresh || cid != 3<<16|7 {
		t.Errorf("after freeing 3:7 the next slot is %x:%x (fresh %v)", cid>>16, cid&0xffff, fresh)
	}
}
