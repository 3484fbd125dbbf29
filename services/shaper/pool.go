package shaper

import (
	"context"
	"fmt"
	"time"
)

// Classes made ahead of need (see ARCHITECTURE.md, "The shaper service").
//
// Creating an HTB class (and its fq_codel leaf) binds a filter block, and
// on a device without ndo_setup_tc (veth, VLAN, ifb, macvlan) the kernel
// records the bind in one global list that it searches from end to end
// first (flow_indr_dev_setup_offload -> indir_dev_add -> find_indir_dev):
// every new class costs in proportion to every block bound in the whole
// system. Changing an existing class binds nothing. So each shaped
// interface keeps a few spare classes, made with their leaves while the
// shaper is idle: a new subscriber takes one (a class change to its rate
// and its map elements, whatever the number of subscribers), and a
// removed subscriber's class becomes a spare (no class deletion, whose
// unbind searches the same list). Class ids no longer follow addresses:
// a subscriber's class is any free slot G:m (m 1..256) of any group G of
// its interface, kept in its record.

const (
	// binSlots is the number of classes one group (a nested HTB) may hold:
	// the per-qdisc class walk stays bounded.
	binSlots = 256
	// spareMbps is the rate a spare class is made with (it carries no
	// traffic: no map element names it).
	spareMbps = 1
	// idleGap is how long the shaper must have had no request before it
	// makes or removes a spare class (each such kernel step holds the
	// writer for one class creation, several milliseconds at 100,000).
	idleGap = 100 * time.Millisecond
)

// spareTarget is how many spare classes an interface with n subscribers
// keeps: 1/64 of them, at least 4 and at most 256.
func spareTarget(n int) int { return min(256, max(4, n/64)) }

// spareMax is how many spares an interface keeps before the idle
// trimming removes some (removals give classes back to the pool).
func spareMax(n int) int { return 2*spareTarget(n) + 16 }

// bin is one group G: its class 7264:G under the root, its nested HTB G:
// and the slots G:1..G:256 taken by subscribers or spares.
type bin struct {
	g       uint16
	used    [binSlots / 64]uint64 // slot m-1 taken
	members int
	spares  int
}

func (b *bin) take(m uint16)     { b.used[(m-1)/64] |= 1 << ((m - 1) % 64) }
func (b *bin) free(m uint16)     { b.used[(m-1)/64] &^= 1 << ((m - 1) % 64) }
func (b *bin) has(m uint16) bool { return b.used[(m-1)/64]&(1<<((m-1)%64)) != 0 }
func (b *bin) full() bool        { return b.members+b.spares >= binSlots }
func (b *bin) empty() bool       { return b.members+b.spares == 0 }

func (b *bin) freeSlot() uint16 {
	for m := uint16(1); m <= binSlots; m++ {
		if !b.has(m) {
			return m
		}
	}
	return 0
}

// spare is a class made ahead of need, with the rate it has now.
type spare struct {
	class uint32
	down  int64 // Mbit/s
}

func validClass(c uint32) bool {
	g, m := c>>16, c&0xffff
	return g > 0 && g < maxGroup && m >= 1 && m <= binSlots
}

// behindLeaves says whether group g's qdisc would share its bucket of the
// device's qdisc hash with HTB's default pfifo leaves. The kernel finds a
// class's parent qdisc on every class change or creation
// (qdisc_lookup -> qdisc_match_from_root, a walk of one of the device's 16
// buckets, keyed by handle), and it hashes every default leaf (invisible
// to dumps) under handle 0: a group in bucket 0 is found only after all
// of them. Measured on this kernel with 10,240 classes on one veth (40
// groups of 256, tc -batch of class change): 15-20 us a change in groups
// 1, 3 and 4, 110-217 us in groups 2 and 21 (bucket 0). New groups skip
// those majors (hash_32(g<<16, 4) == hash_32(0, 4) == 0).
func behindLeaves(g uint16) bool { return (uint32(g)<<16)*0x61C88647>>28 == 0 }

// slot returns a free class id for a class to be made on the interface:
// in the lowest group with room, or in a new group (fresh: not yet in the
// kernel nor in the state), never one behind the default leaves.
func (is *ifaceS) slot() (b *bin, classid uint32, fresh bool, err error) {
	for g := uint16(1); g < maxGroup; g++ {
		if behindLeaves(g) {
			continue
		}
		b := is.bins[g]
		if b == nil {
			nb := &bin{g: g}
			return nb, uint32(g)<<16 | 1, true, nil
		}
		if !b.full() {
			return b, uint32(g)<<16 | uint32(b.freeSlot()), false, nil
		}
	}
	return nil, 0, false, fmt.Errorf("interface %s has no free group", is.k.name)
}

// claim records classid as taken in the state (by a subscriber: member
// true; or a spare), its group made in the state when missing.
func (is *ifaceS) claim(classid uint32, member bool) *bin {
	g := uint16(classid >> 16)
	b := is.bins[g]
	if b == nil {
		b = &bin{g: g}
		is.bins[g] = b
	}
	b.take(uint16(classid))
	if member {
		b.members++
		is.count++
	} else {
		b.spares++
	}
	return b
}

// release gives classid's slot back (member: it was a subscriber's).
func (is *ifaceS) release(classid uint32, member bool) {
	b := is.bins[uint16(classid>>16)]
	if b == nil {
		return
	}
	b.free(uint16(classid))
	if member {
		b.members--
		is.count--
	} else {
		b.spares--
	}
}

// popSpare takes a spare out of the pool (its slot becomes a
// subscriber's).
func (is *ifaceS) popSpare() (spare, bool) {
	if len(is.spares) == 0 {
		return spare{}, false
	}
	sp := is.spares[len(is.spares)-1]
	is.spares = is.spares[:len(is.spares)-1]
	if b := is.bins[uint16(sp.class>>16)]; b != nil {
		b.spares--
		b.members++
	}
	is.count++
	return sp, true
}

// pushSpare makes a subscriber's class (or a popped spare given back) a
// spare.
func (is *ifaceS) pushSpare(sp spare) {
	if b := is.bins[uint16(sp.class>>16)]; b != nil {
		b.members--
		b.spares++
	}
	is.count--
	is.spares = append(is.spares, sp)
}

// makeSpare makes one spare class on the interface (its group first when
// new), with its leaf.
func (s *Service) makeSpare(is *ifaceS) error {
	b, cid, fresh, err := is.slot()
	if err != nil {
		return err
	}
	if fresh {
		if err := s.k.putGroup(is.k, b.g); err != nil {
			_ = s.k.delGroup(is.k, b.g)
			return err
		}
		is.bins[b.g] = b
	}
	if err := s.k.putSub(is.k, cid, spareMbps, true); err != nil {
		_ = s.k.delSub(is.k, cid)
		if fresh {
			_ = s.k.delGroup(is.k, b.g)
			delete(is.bins, b.g)
		}
		return err
	}
	is.claim(cid, false)
	is.spares = append(is.spares, spare{class: cid, down: spareMbps})
	return nil
}

// dropSpare removes one spare class (from the group with the fewest
// subscribers), and its group when that leaves it empty.
func (s *Service) dropSpare(is *ifaceS) error {
	best := -1
	for i, sp := range is.spares {
		if best < 0 || is.bins[uint16(sp.class>>16)].members < is.bins[uint16(is.spares[best].class>>16)].members {
			best = i
		}
	}
	sp := is.spares[best]
	if err := s.k.delSub(is.k, sp.class); err != nil {
		return err
	}
	is.spares = append(is.spares[:best], is.spares[best+1:]...)
	is.release(sp.class, false)
	if b := is.bins[uint16(sp.class>>16)]; b != nil && b.empty() {
		if err := s.k.delGroup(is.k, b.g); err != nil {
			return err
		}
		delete(is.bins, b.g)
	}
	return nil
}

// tendOnce does one step of keeping the pools: one spare made on an
// interface below its target, or one removed from an interface above its
// maximum. It says whether there was anything to do.
func (s *Service) tendOnce() (bool, error) {
	for _, name := range sortedKeys(s.state.ifaces) {
		is := s.state.ifaces[name]
		switch n := len(is.spares); {
		case n < spareTarget(is.count):
			return true, s.makeSpare(is)
		case n > spareMax(is.count):
			return true, s.dropSpare(is)
		}
	}
	return false, nil
}

// touched notes a request that used the pools: the tending waits until
// idleGap has passed without one. Called with mu held.
func (s *Service) touched() {
	s.lastReq = time.Now()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// tend keeps every interface's spares between its target and its maximum
// while the shaper is idle, one kernel step at a time (the writer lock
// released between steps, so a request waits for one step at most), until
// ctx ends.
func (s *Service) tend(ctx context.Context) {
	wait := time.Duration(0)
	for {
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		s.mu.Lock()
		if s.state == nil || s.w == nil {
			s.mu.Unlock()
			return
		}
		if quiet := time.Since(s.lastReq); quiet < idleGap {
			s.mu.Unlock()
			wait = idleGap - quiet
			continue
		}
		did, err := s.tendOnce()
		s.mu.Unlock()
		switch {
		case err != nil:
			s.deps.Log.Warn("spare class not made or removed (tried again later)", "err", err)
			wait = 5 * time.Second
		case did:
			wait = 0
		default:
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
				wait = idleGap
			}
		}
	}
}

// Spares reports each shaped interface's spare classes and its target
// (for tests and benchmarks).
func (s *Service) Spares() map[string][2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][2]int{}
	if s.state == nil {
		return out
	}
	for name, is := range s.state.ifaces {
		out[name] = [2]int{len(is.spares), spareTarget(is.count)}
	}
	return out
}

// Settle brings every interface's spares to where the idle tending would
// (between the target and the maximum) at once, whether or not the shaper
// is idle: for tests that compare kernel states.
func (s *Service) Settle() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(); err != nil {
		return err
	}
	for {
		did, err := s.tendOnce()
		if err != nil || !did {
			return err
		}
	}
}
