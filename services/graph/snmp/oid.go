// Package snmp is a read-only SNMPv2c agent (v1 Get and GetNext too): the
// MIB it serves is a sorted set of subtrees (scalars, conceptual tables)
// whose values are read when asked, and the agent answers Get, GetNext and
// GetBulk from it over UDP with gosnmp's BER codec. It knows nothing of
// where the values come from: the graph service gives it the system
// group's text, the interface dump and the per-client rows.
package snmp

import (
	"slices"
	"strconv"
	"strings"
)

// OID is an object identifier as its sub-identifiers.
type OID []uint32

// ParseOID reads ".1.3.6.1..." or "1.3.6.1..." (gosnmp's form).
func ParseOID(s string) (OID, bool) {
	s = strings.TrimPrefix(s, ".")
	if s == "" {
		return OID{}, true
	}
	out := make(OID, 0, strings.Count(s, ".")+1)
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.ParseUint(part, 10, 32)
		if err != nil {
			return nil, false
		}
		out = append(out, uint32(n))
	}
	return out, true
}

// MustOID is ParseOID for the constants of this package.
func MustOID(s string) OID {
	o, ok := ParseOID(s)
	if !ok {
		panic("snmp: bad OID " + s)
	}
	return o
}

// String is the dotted form with a leading dot, as gosnmp writes it.
func (o OID) String() string {
	b := make([]byte, 0, len(o)*4)
	for _, n := range o {
		b = append(b, '.')
		b = strconv.AppendUint(b, uint64(n), 10)
	}
	return string(b)
}

// Compare orders OIDs lexicographically (the MIB's order).
func (o OID) Compare(p OID) int { return slices.Compare(o, p) }

// HasPrefix reports whether p is o or an ancestor of it.
func (o OID) HasPrefix(p OID) bool {
	return len(o) >= len(p) && slices.Equal(o[:len(p)], p)
}

// Append is o followed by subs, in a new slice.
func (o OID) Append(subs ...uint32) OID {
	out := make(OID, 0, len(o)+len(subs))
	return append(append(out, o...), subs...)
}
