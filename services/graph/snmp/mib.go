package snmp

import (
	"sort"

	"github.com/gosnmp/gosnmp"
)

// Value is a variable's value as gosnmp encodes it: Integer as int,
// Counter32, Gauge32 and TimeTicks as uint32, Counter64 as uint64,
// OctetString as []byte or string, ObjectIdentifier as a dotted string,
// IPAddress as 4 bytes. The exceptions noSuchObject and noSuchInstance
// are Values of those types with no content.
type Value struct {
	Type gosnmp.Asn1BER
	V    any
}

// The constructors of the values this agent serves.
func Int(n int) Value          { return Value{gosnmp.Integer, n} }
func Str(s string) Value       { return Value{gosnmp.OctetString, s} }
func Bytes(b []byte) Value     { return Value{gosnmp.OctetString, b} }
func Counter32(n uint64) Value { return Value{gosnmp.Counter32, uint32(n)} } // wraps at 2^32, as IF-MIB's 32-bit counters do
func Counter64(n uint64) Value { return Value{gosnmp.Counter64, n} }
func Gauge32(n uint64) Value   { return Value{gosnmp.Gauge32, uint32(min(n, 1<<32-1))} }
func Ticks(n uint64) Value     { return Value{gosnmp.TimeTicks, uint32(n)} }
func ObjectID(o OID) Value     { return Value{gosnmp.ObjectIdentifier, o.String()} }
func IPv4(b [4]byte) Value     { return Value{gosnmp.IPAddress, b[:]} }
func (v Value) Exception() bool {
	return v.Type == gosnmp.NoSuchObject || v.Type == gosnmp.NoSuchInstance
}

var (
	noSuchObject   = Value{Type: gosnmp.NoSuchObject}
	noSuchInstance = Value{Type: gosnmp.NoSuchInstance}
)

// Subtree is a part of the MIB under one OID.
type Subtree interface {
	// Root is the subtree's OID; nothing it serves lies outside it.
	Root() OID
	// Get is the value at o (o lies under Root), or noSuchObject /
	// noSuchInstance.
	Get(o OID) Value
	// Next is the first variable after o in the subtree; o lies under
	// Root or before it. ok is false when the subtree has nothing after o.
	Next(o OID) (next OID, v Value, ok bool)
}

// MIB is the agent's view: subtrees that do not overlap, in OID order.
type MIB struct{ trees []Subtree }

// NewMIB orders the subtrees.
func NewMIB(trees ...Subtree) *MIB {
	sort.Slice(trees, func(i, j int) bool { return trees[i].Root().Compare(trees[j].Root()) < 0 })
	return &MIB{trees: trees}
}

// Get is the value at o.
func (m *MIB) Get(o OID) Value {
	for _, t := range m.trees {
		if o.HasPrefix(t.Root()) {
			return t.Get(o)
		}
	}
	return noSuchObject
}

// Next is the first variable after o in the whole MIB.
func (m *MIB) Next(o OID) (OID, Value, bool) {
	for _, t := range m.trees {
		r := t.Root()
		if o.Compare(r) < 0 || o.HasPrefix(r) {
			if n, v, ok := t.Next(o); ok {
				return n, v, true
			}
		}
	}
	return nil, Value{}, false
}

// Scalar is one scalar object of a Scalars group: its instance is
// root.Sub.0. Get's ok false is an object without an instance now.
type Scalar struct {
	Sub uint32
	Get func() (Value, bool)
}

// Scalars is a group of scalar objects (the system group, ifNumber).
type Scalars struct {
	root  OID
	items []Scalar
	// single: root is the one object's OID (Single).
	single bool
}

// NewScalars is the group under root; items in any order.
func NewScalars(root OID, items ...Scalar) *Scalars {
	sort.Slice(items, func(i, j int) bool { return items[i].Sub < items[j].Sub })
	return &Scalars{root: root, items: items}
}

func (s *Scalars) Root() OID { return s.root }

func (s *Scalars) Get(o OID) Value {
	rel := o[len(s.root):]
	if s.single {
		rel = o[len(s.root)-1:]
	}
	if len(rel) == 0 {
		return noSuchObject
	}
	i := sort.Search(len(s.items), func(i int) bool { return s.items[i].Sub >= rel[0] })
	if i == len(s.items) || s.items[i].Sub != rel[0] {
		return noSuchObject
	}
	if len(rel) != 2 || rel[1] != 0 {
		return noSuchInstance
	}
	if v, ok := s.items[i].Get(); ok {
		return v
	}
	return noSuchInstance
}

func (s *Scalars) Next(o OID) (OID, Value, bool) {
	base := s.root
	if s.single {
		base = s.root[:len(s.root)-1]
	}
	for _, it := range s.items {
		inst := base.Append(it.Sub, 0)
		if inst.Compare(o) <= 0 {
			continue
		}
		if v, ok := it.Get(); ok {
			return inst, v, true
		}
	}
	return nil, Value{}, false
}

// Single is one scalar object alone, as a subtree of its own (ifNumber
// beside ifTable under interfaces): its instance is oid.0.
func Single(oid OID, get func() (Value, bool)) *Scalars {
	return NewScalars(oid[:len(oid)-1], Scalar{oid[len(oid)-1], get}).alone()
}

// alone narrows the group's root to its one object.
func (s *Scalars) alone() *Scalars {
	s.root = s.root.Append(s.items[0].Sub)
	s.single = true
	return s
}

// Rows are a conceptual table's rows at one moment, in index order.
type Rows interface {
	Len() int
	// Index is row i's index as OID sub-identifiers.
	Index(i int) OID
	// Cell is column col of row i; ok false leaves the cell out (a
	// column the row has no value for).
	Cell(col uint32, i int) (Value, bool)
}

// Table is a conceptual table (root.1 is its entry, root.1.col.index a
// cell) whose rows are read from Snapshot at each request.
type Table struct {
	root     OID
	cols     []uint32
	Snapshot func() Rows
}

// NewTable is the table at root with these columns.
func NewTable(root OID, cols []uint32, snapshot func() Rows) *Table {
	cols = append([]uint32(nil), cols...)
	sort.Slice(cols, func(i, j int) bool { return cols[i] < cols[j] })
	return &Table{root: root, cols: cols, Snapshot: snapshot}
}

func (t *Table) Root() OID { return t.root }

func (t *Table) Get(o OID) Value {
	rel := o[len(t.root):]
	if len(rel) < 2 || rel[0] != 1 {
		return noSuchObject
	}
	ci := sort.Search(len(t.cols), func(i int) bool { return t.cols[i] >= rel[1] })
	if ci == len(t.cols) || t.cols[ci] != rel[1] {
		return noSuchObject
	}
	rows, idx := t.Snapshot(), OID(rel[2:])
	r := sort.Search(rows.Len(), func(i int) bool { return rows.Index(i).Compare(idx) >= 0 })
	if r == rows.Len() || rows.Index(r).Compare(idx) != 0 {
		return noSuchInstance
	}
	if v, ok := rows.Cell(rel[1], r); ok {
		return v
	}
	return noSuchInstance
}

// Next walks column by column, each column in index order (the order
// of the table's OIDs). A column without a value in any row is skipped
// after one pass over the rows.
func (t *Table) Next(o OID) (OID, Value, bool) {
	rows := t.Snapshot()
	ci, from := 0, 0
	if o.HasPrefix(t.root) {
		rel := o[len(t.root):]
		switch {
		case len(rel) == 0 || rel[0] < 1, len(rel) == 1 && rel[0] == 1:
		case rel[0] > 1:
			return nil, Value{}, false
		default:
			ci = sort.Search(len(t.cols), func(i int) bool { return t.cols[i] >= rel[1] })
			if ci < len(t.cols) && t.cols[ci] == rel[1] {
				idx := OID(rel[2:])
				from = sort.Search(rows.Len(), func(i int) bool { return rows.Index(i).Compare(idx) > 0 })
			}
		}
	}
	for ; ci < len(t.cols); ci, from = ci+1, 0 {
		col := t.cols[ci]
		for r := from; r < rows.Len(); r++ {
			if v, ok := rows.Cell(col, r); ok {
				return t.root.Append(append([]uint32{1, col}, rows.Index(r)...)...), v, true
			}
		}
	}
	return nil, Value{}, false
}
