// Package pool holds the free/used bitmaps the engine allocates addresses and
// delegated prefixes from.
//
// A pool is a range of N slots (IPv4 addresses from a start address, IPv6
// addresses from a start address, or prefix indexes in a delegation slice).
// A bitmap with a rotating cursor keeps allocation O(words scanned) and, by
// moving on rather than reusing the lowest free slot, leaves a just-released
// address idle for as long as possible, which is what clients that come back
// with an old address hope for.
package pool

import (
	"math/bits"
	"net/netip"
)

// Bitmap is a set of N slots. The zero value has no slots. Not safe for
// concurrent use: the engine holds its lease table lock around it.
type Bitmap struct {
	words  []uint64
	n      uint64
	used   uint64
	cursor uint64
}

// NewBitmap returns a bitmap of n free slots.
func NewBitmap(n uint64) *Bitmap {
	return &Bitmap{words: make([]uint64, (n+63)/64), n: n}
}

// Len is the number of slots.
func (b *Bitmap) Len() uint64 { return b.n }

// Used is the number of taken slots.
func (b *Bitmap) Used() uint64 { return b.used }

// Has reports whether slot i is taken. Out of range counts as taken.
func (b *Bitmap) Has(i uint64) bool {
	if i >= b.n {
		return true
	}
	return b.words[i/64]&(1<<(i%64)) != 0
}

// Set takes slot i; it reports false when it was already taken or out of range.
func (b *Bitmap) Set(i uint64) bool {
	if b.Has(i) {
		return false
	}
	b.words[i/64] |= 1 << (i % 64)
	b.used++
	return true
}

// Clear frees slot i.
func (b *Bitmap) Clear(i uint64) {
	if i < b.n && b.words[i/64]&(1<<(i%64)) != 0 {
		b.words[i/64] &^= 1 << (i % 64)
		b.used--
	}
}

// Alloc takes the next free slot after the cursor, wrapping once.
func (b *Bitmap) Alloc() (uint64, bool) {
	if b.used >= b.n {
		return 0, false
	}
	nw := uint64(len(b.words))
	start := b.cursor / 64
	for k := uint64(0); k <= nw; k++ {
		w := (start + k) % nw
		free := ^b.words[w]
		if k == 0 {
			free &= ^uint64(0) << (b.cursor % 64) // only at or after the cursor
		}
		if w == nw-1 && b.n%64 != 0 {
			free &= 1<<(b.n%64) - 1
		}
		if free == 0 {
			continue
		}
		i := w*64 + uint64(bits.TrailingZeros64(free))
		b.Set(i)
		b.cursor = (i + 1) % b.n
		return i, true
	}
	// The cursor's own word before the cursor was skipped on the first pass.
	for i := uint64(0); i < b.n; i++ {
		if b.Set(i) {
			b.cursor = (i + 1) % b.n
			return i, true
		}
	}
	return 0, false
}

// Range maps addresses in [First, First+N) onto bitmap slots.
type Range struct {
	First netip.Addr
	*Bitmap
}

// NewRange returns a pool of the addresses from first to last inclusive.
func NewRange(first, last netip.Addr) *Range {
	return &Range{First: first, Bitmap: NewBitmap(Offset(first, last) + 1)}
}

// Index returns the slot of a, and false when a is outside the range.
func (r *Range) Index(a netip.Addr) (uint64, bool) {
	if a.BitLen() != r.First.BitLen() || a.Less(r.First) {
		return 0, false
	}
	i := Offset(r.First, a)
	return i, i < r.n
}

// Addr returns the address in slot i.
func (r *Range) Addr(i uint64) netip.Addr { return Add(r.First, i) }

// Contains reports whether a lies in the range.
func (r *Range) Contains(a netip.Addr) bool { _, ok := r.Index(a); return ok }

// Offset is b - a for addresses of one family, saturating at 2^64-1.
func Offset(a, b netip.Addr) uint64 {
	x, y := a.As16(), b.As16()
	for i := 0; i < 8; i++ {
		if x[i] != y[i] {
			return ^uint64(0)
		}
	}
	var lo, hi uint64
	for i := 8; i < 16; i++ {
		lo, hi = lo<<8|uint64(x[i]), hi<<8|uint64(y[i])
	}
	return hi - lo
}

// Add returns a + n (within the low 64 bits).
func Add(a netip.Addr, n uint64) netip.Addr {
	b := a.As16()
	var lo uint64
	for i := 8; i < 16; i++ {
		lo = lo<<8 | uint64(b[i])
	}
	lo += n
	for i := 15; i >= 8; i-- {
		b[i] = byte(lo)
		lo >>= 8
	}
	out := netip.AddrFrom16(b)
	if a.Is4() {
		return out.Unmap()
	}
	return out
}
