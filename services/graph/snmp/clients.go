package snmp

import (
	"bytes"
	"slices"
	"sync/atomic"
)

// ClientRow is one registered client in the per-client table.
type ClientRow struct {
	MAC            [6]byte
	IP             [4]byte
	HasIP          bool
	Hostname, Plan string
	// Counted: the shaper gave this client's counters. Without them the
	// counter columns are left out of the row (never a made-up zero).
	Counted  bool
	Down, Up uint64
}

// The per-client table's columns (ClientTableOID.1.<col>.<MAC>).
const (
	ClientMAC       = 1 // OCTET STRING (SIZE(6)), the MAC
	ClientIP        = 2 // IpAddress
	ClientHostname  = 3 // DisplayString
	ClientPlan      = 4 // DisplayString, "" without a plan
	ClientDownBytes = 5 // Counter64: bytes sent to the client (its shaper class)
	ClientUpBytes   = 6 // Counter64: bytes from the client within its rate (its police rule)
)

// ClientRows are the table's rows at one refresh, in MAC order.
type ClientRows struct {
	rows []ClientRow
	idx  []uint32 // six sub-identifiers per row, so an Index allocates nothing
}

// NewClientRows orders rows by MAC (they are taken as given: the caller
// gives up the slice).
func NewClientRows(rows []ClientRow) *ClientRows {
	slices.SortFunc(rows, func(a, b ClientRow) int { return bytes.Compare(a.MAC[:], b.MAC[:]) })
	idx := make([]uint32, 6*len(rows))
	for i, r := range rows {
		for j, b := range r.MAC {
			idx[6*i+j] = uint32(b)
		}
	}
	return &ClientRows{rows: rows, idx: idx}
}

func (c *ClientRows) Len() int        { return len(c.rows) }
func (c *ClientRows) Index(i int) OID { return c.idx[6*i : 6*i+6 : 6*i+6] }

func (c *ClientRows) Cell(col uint32, i int) (Value, bool) {
	r := &c.rows[i]
	switch col {
	case ClientMAC:
		return Bytes(r.MAC[:]), true
	case ClientIP:
		return IPv4(r.IP), r.HasIP
	case ClientHostname:
		return Str(r.Hostname), true
	case ClientPlan:
		return Str(r.Plan), true
	case ClientDownBytes:
		return Counter64(r.Down), r.Counted
	case ClientUpBytes:
		return Counter64(r.Up), r.Counted
	}
	return Value{}, false
}

// Counted is how many rows carry counters.
func (c *ClientRows) Counted() int {
	n := 0
	for i := range c.rows {
		if c.rows[i].Counted {
			n++
		}
	}
	return n
}

// ClientTable is the per-client table, its rows swapped whole at each
// refresh so that a request reads one refresh's rows.
type ClientTable struct{ cur atomic.Pointer[ClientRows] }

// Set replaces the rows.
func (t *ClientTable) Set(r *ClientRows) { t.cur.Store(r) }

// Rows are the current rows (none before the first Set).
func (t *ClientTable) Rows() *ClientRows {
	if r := t.cur.Load(); r != nil {
		return r
	}
	return &ClientRows{}
}

// Subtrees are the client count and the table.
func (t *ClientTable) Subtrees() []Subtree {
	return []Subtree{
		Single(ClientCountOID, func() (Value, bool) { return Gauge32(uint64(t.Rows().Len())), true }),
		NewTable(ClientTableOID, []uint32{ClientMAC, ClientIP, ClientHostname, ClientPlan, ClientDownBytes, ClientUpBytes},
			func() Rows { return t.Rows() }),
	}
}
