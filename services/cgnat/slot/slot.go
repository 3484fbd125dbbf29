// Package slot is deterministic carrier-grade NAT (RFC 7422): the public
// address and port block of a subscriber are a pure function of its slot,
// a small integer the service allocates once and stores with the
// subscriber, so the same subscribers keep the same slots across restarts
// and adding a subscriber never moves an existing one (a slot is never a
// rank in a sorted list, which would shift when someone is inserted).
//
// # The function
//
// Given the pool's addresses in their configured order A[0..N-1], the
// port range port_min..port_max and the block size B:
//
//	per_ip   P = floor((port_max - port_min + 1) / B)
//	capacity C = N * P
//
// slot s (0 <= s < C) is
//
//	address  A[s mod N]
//	block    b = floor(s / N)
//	ports    port_min + b*B .. port_min + (b+1)*B - 1
//
// Consecutive slots go round the addresses first (as Juniper's and TNSR's
// deterministic NAT spread subscribers over the pool), so a lightly used
// pool shares each public address among as few subscribers as possible.
// The ports above port_min + P*B - 1, when B does not divide the range,
// belong to nobody.
//
// The inverse (the audit question "who had address a, port p?") is O(1):
// i = index of a in the pool (a hash map), b = floor((p - port_min) / B),
// s = b*N + i, valid when port_min <= p <= port_min + P*B - 1.
//
// RFC 7422 section 2 describes the same idea with an arbitrary bijection of
// the private space onto (address, block); here the private side is the
// allocated slot rather than the private address itself, because the
// router's subscribers are not a contiguous private range.
package slot

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"strings"
)

// Mapping is the public side of one slot.
type Mapping struct {
	Slot      int
	Public    netip.Addr
	PortStart int
	PortEnd   int
}

// Plan is one layout of the pool: built once per configuration, read
// concurrently.
type Plan struct {
	addrs   []netip.Addr
	index   map[netip.Addr]int
	portMin int
	portMax int
	block   int
	perIP   int
}

// New builds the plan of pool (the addresses in order, each once),
// ports portMin..portMax and blocks of block ports.
func New(pool []netip.Addr, portMin, portMax, block int) (*Plan, error) {
	if portMin < 1 || portMax > 65535 || portMin > portMax {
		return nil, fmt.Errorf("port range %d-%d: ports are 1-65535, first not above last", portMin, portMax)
	}
	if block < 1 || block > portMax-portMin+1 {
		return nil, fmt.Errorf("block size %d: 1 to the size of the port range (%d)", block, portMax-portMin+1)
	}
	p := &Plan{addrs: pool, index: make(map[netip.Addr]int, len(pool)), portMin: portMin, portMax: portMax, block: block}
	for i, a := range pool {
		if !a.Is4() {
			return nil, fmt.Errorf("pool address %s is not IPv4", a)
		}
		if _, dup := p.index[a]; dup {
			return nil, fmt.Errorf("pool address %s is in the pool twice", a)
		}
		p.index[a] = i
	}
	p.perIP = (portMax - portMin + 1) / block
	return p, nil
}

// PerIP is how many subscribers share one public address.
func (p *Plan) PerIP() int { return p.perIP }

// Capacity is how many slots the pool has.
func (p *Plan) Capacity() int { return len(p.addrs) * p.perIP }

// Addresses is the number of pool addresses.
func (p *Plan) Addresses() int { return len(p.addrs) }

// Slot is the mapping of slot s; false when s is outside the capacity.
func (p *Plan) Slot(s int) (Mapping, bool) {
	if s < 0 || s >= p.Capacity() {
		return Mapping{}, false
	}
	n := len(p.addrs)
	start := p.portMin + (s/n)*p.block
	return Mapping{Slot: s, Public: p.addrs[s%n], PortStart: start, PortEnd: start + p.block - 1}, true
}

// Lookup is the slot whose block holds port on public; false when none
// does (an address outside the pool, a port outside every block).
func (p *Plan) Lookup(public netip.Addr, port int) (int, bool) {
	i, ok := p.index[public]
	if !ok || port < p.portMin || port > p.portMin+p.perIP*p.block-1 {
		return 0, false
	}
	return ((port-p.portMin)/p.block)*len(p.addrs) + i, true
}

// ParsePool reads a pool: items that are single addresses, first-last
// ranges or a.b.c.d/nn networks (every address of it), each item a
// comma-separated string or an element of the list. The addresses keep
// the order given; an address given twice is an error.
func ParsePool(items []string) ([]netip.Addr, error) {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	add := func(a netip.Addr) error {
		if seen[a] {
			return fmt.Errorf("%s is in the pool twice", a)
		}
		if len(out) >= 1<<20 {
			return errors.New("pool larger than 1,048,576 addresses")
		}
		seen[a] = true
		out = append(out, a)
		return nil
	}
	for _, item := range items {
		for _, f := range strings.Split(item, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			switch {
			case strings.Contains(f, "-"):
				lo, hi, _ := strings.Cut(f, "-")
				a, err1 := netip.ParseAddr(strings.TrimSpace(lo))
				b, err2 := netip.ParseAddr(strings.TrimSpace(hi))
				if err1 != nil || err2 != nil || !a.Is4() || !b.Is4() {
					return nil, fmt.Errorf("%q is not a range of IPv4 addresses", f)
				}
				if b.Less(a) {
					return nil, fmt.Errorf("%q: the range is reversed", f)
				}
				for x := a; ; x = x.Next() {
					if err := add(x); err != nil {
						return nil, err
					}
					if x == b {
						break
					}
				}
			case strings.Contains(f, "/"):
				pfx, err := netip.ParsePrefix(f)
				if err != nil || !pfx.Addr().Is4() {
					return nil, fmt.Errorf("%q is not an IPv4 network", f)
				}
				pfx = pfx.Masked()
				for x := pfx.Addr(); pfx.Contains(x); x = x.Next() {
					if err := add(x); err != nil {
						return nil, err
					}
				}
			default:
				a, err := netip.ParseAddr(f)
				if err != nil || !a.Is4() {
					return nil, fmt.Errorf("%q is not an IPv4 address", f)
				}
				if err := add(a); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// FormatPool writes addresses back as the shortest comma-separated list of
// single addresses and first-last ranges, in their order.
func FormatPool(addrs []netip.Addr) string {
	var b strings.Builder
	for i := 0; i < len(addrs); {
		j := i
		for j+1 < len(addrs) && addrs[j].Next() == addrs[j+1] {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(addrs[i].String())
		if j > i {
			b.WriteByte('-')
			b.WriteString(addrs[j].String())
		}
		i = j + 1
	}
	return b.String()
}

// Alloc hands out slot numbers, lowest free first. It is not safe for
// concurrent use.
type Alloc struct {
	words []uint64
	used  int
	// low is a word index below which every word is full.
	low int
}

// Take marks s used; false when it already was.
func (a *Alloc) Take(s int) bool {
	w, bit := s/64, uint(s%64)
	for len(a.words) <= w {
		a.words = append(a.words, 0)
	}
	if a.words[w]&(1<<bit) != 0 {
		return false
	}
	a.words[w] |= 1 << bit
	a.used++
	return true
}

// Free marks s free.
func (a *Alloc) Free(s int) {
	w, bit := s/64, uint(s%64)
	if w >= len(a.words) || a.words[w]&(1<<bit) == 0 {
		return
	}
	a.words[w] &^= 1 << bit
	a.used--
	if w < a.low {
		a.low = w
	}
}

// Used is how many slots are taken.
func (a *Alloc) Used() int { return a.used }

// UsedBelow is how many slots below limit are taken (a count of bits:
// about a microsecond for 100,000 slots).
func (a *Alloc) UsedBelow(limit int) int {
	n := 0
	for w := 0; w < len(a.words) && w*64 < limit; w++ {
		word := a.words[w]
		if rest := limit - w*64; rest < 64 {
			word &= 1<<uint(rest) - 1
		}
		n += bits.OnesCount64(word)
	}
	return n
}

// Next takes and returns the lowest free slot below limit; false when
// every slot below limit is used.
func (a *Alloc) Next(limit int) (int, bool) {
	for w := a.low; w*64 < limit; w++ {
		if w >= len(a.words) {
			a.words = append(a.words, 0)
		}
		if a.words[w] == ^uint64(0) {
			a.low = w + 1
			continue
		}
		s := w*64 + bits.TrailingZeros64(^a.words[w])
		if s >= limit {
			return 0, false
		}
		a.Take(s)
		return s, true
	}
	return 0, false
}
