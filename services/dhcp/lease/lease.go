// Package lease holds DHCP leases: the record, the in-memory table the
// servers answer from, the durable store behind a small interface, and the
// group committer that makes many concurrent lease writes one transaction.
//
// The engine answers from memory for speed, but an answer that grants an
// address only goes out after the lease is durable, so a restart can never
// hand the address to a second client.
package lease

import (
	"context"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Kind says what a lease binds.
type Kind string

// Lease kinds; they are also the first element of the store key.
const (
	V4 Kind = "v4"   // an IPv4 address
	NA Kind = "v6na" // a DHCPv6 IA_NA address
	PD Kind = "v6pd" // a DHCPv6 delegated prefix
)

// State is where a lease is in its life.
type State string

// Lease states. Offered leases live only in memory: an offer that is lost in
// a restart costs the client one retry, never a duplicate address.
const (
	Offered  State = "offered"
	Bound    State = "bound"
	Declined State = "declined" // quarantined after a DECLINE until End
)

// Lease is one binding of an address or prefix to a client.
type Lease struct {
	Kind Kind       `json:"kind"`
	Addr netip.Addr `json:"addr"`
	// PrefixLen is the delegated prefix length (PD only).
	PrefixLen int    `json:"prefix_len,omitempty"`
	Iface     string `json:"iface"`
	// MAC is upper-case with colons; for DHCPv6 it is taken from the DUID
	// when the DUID carries one.
	MAC string `json:"mac,omitempty"`
	// ClientID is DHCPv4 option 61 in hex, when the client sends one; it
	// then identifies the client instead of the MAC (RFC 2131 4.2).
	ClientID string    `json:"client_id,omitempty"`
	DUID     string    `json:"duid,omitempty"` // hex
	IAID     uint32    `json:"iaid,omitempty"`
	Hostname string    `json:"hostname,omitempty"`
	State    State     `json:"state"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	// CircuitID and RemoteID are option 82 as the OLT inserted it.
	CircuitID string `json:"circuit_id,omitempty"`
	RemoteID  string `json:"remote_id,omitempty"`
	// Via is the next hop of a delegated prefix's route: the client's address.
	Via netip.Addr `json:"via,omitzero"`
}

// Prefix is the delegated prefix of a PD lease, or the address as a host prefix.
func (l *Lease) Prefix() netip.Prefix {
	if l.Kind == PD {
		return netip.PrefixFrom(l.Addr, l.PrefixLen)
	}
	return netip.PrefixFrom(l.Addr, l.Addr.BitLen())
}

// Key identifies the lease's address or prefix; the store key is KeyPrefix+Key.
func (l *Lease) Key() string {
	if l.Kind == PD {
		return string(l.Kind) + "/" + l.Prefix().String()
	}
	return string(l.Kind) + "/" + l.Addr.String()
}

// AddrKey is the Key of the IPv4 or IA_NA lease on a.
func AddrKey(k Kind, a netip.Addr) string { return string(k) + "/" + a.String() }

// PrefixKey is the Key of the PD lease on p.
func PrefixKey(p netip.Prefix) string { return string(PD) + "/" + p.String() }

// ClientKey identifies the client end of a binding in one table.
func (l *Lease) ClientKey() string {
	if l.Kind == V4 {
		return ClientKey4(l.Iface, l.MAC, l.ClientID)
	}
	return ClientKey6(l.Kind, l.Iface, l.DUID, l.IAID)
}

// ClientKey4 is the client key of an IPv4 lease: the client identifier
// when the client sent one, else the MAC.
func ClientKey4(iface, mac, clientID string) string {
	if clientID != "" {
		return "v4|" + iface + "|id:" + clientID
	}
	return "v4|" + iface + "|" + mac
}

// ClientKey6 is the client key of a DHCPv6 IA.
func ClientKey6(k Kind, iface, duid string, iaid uint32) string {
	return string(k) + "|" + iface + "|" + duid + "|" + strconv.FormatUint(uint64(iaid), 16)
}

// Cached reports whether a client renewing its own bound lease l may be
// answered from the durable lease as it stands, without a write (lease
// caching, as ISC dhcpd's dhcp-cache-threshold): l.End was set to the time
// of its last write plus lifetime, so the lease's age is lifetime minus
// what is left, and while that age is under threshold (a fraction of
// lifetime) the client is given what is left. A lease whose end lies
// beyond now+lifetime (the lease time was shortened since) is not cached.
func Cached(l *Lease, lifetime time.Duration, threshold float64, now time.Time) (left time.Duration, ok bool) {
	if l == nil || l.State != Bound || threshold <= 0 {
		return 0, false
	}
	left = l.End.Sub(now)
	age := lifetime - left
	if age < 0 || left <= 0 || float64(age) >= threshold*float64(lifetime) {
		return 0, false
	}
	return left.Truncate(time.Second), true
}

// Op is one durable change: Lease nil deletes Key.
type Op struct {
	Key   string
	Lease *Lease
}

// Put returns the op that stores l (a copy).
func Put(l *Lease) Op { c := *l; return Op{Key: l.Key(), Lease: &c} }

// Del returns the op that deletes l.
func Del(l *Lease) Op { return Op{Key: l.Key()} }

// Store keeps leases durably.
type Store interface {
	// Load returns every stored lease.
	Load(ctx context.Context) ([]Lease, error)
	// Apply makes every op durable before it returns.
	Apply(ctx context.Context, ops []Op) error
}

// MemStore is a Store in memory, for unit tests of the servers.
type MemStore struct {
	mu      sync.Mutex
	m       map[string]Lease
	Applies int // number of Apply calls, to check batching
	Err     error
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{m: map[string]Lease{}} }

// Load implements Store.
func (s *MemStore) Load(context.Context) ([]Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Lease, 0, len(s.m))
	for _, l := range s.m {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

// Apply implements Store.
func (s *MemStore) Apply(_ context.Context, ops []Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Err != nil {
		return s.Err
	}
	s.Applies++
	for _, op := range ops {
		if op.Lease == nil {
			delete(s.m, op.Key)
		} else {
			s.m[op.Key] = *op.Lease
		}
	}
	return nil
}

// Table is the in-memory index the servers answer from. Callers hold its
// lock (Lock/Unlock) around every use: one lock for v4 and v6 keeps a
// reconfiguration from racing an allocation.
type Table struct {
	sync.Mutex
	byKey    map[string]*Lease
	byClient map[string]*Lease
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{byKey: map[string]*Lease{}, byClient: map[string]*Lease{}}
}

// Get returns the lease on key.
func (t *Table) Get(key string) *Lease { return t.byKey[key] }

// Client returns the lease held by a client key.
func (t *Table) Client(ck string) *Lease { return t.byClient[ck] }

// Put inserts or replaces l, re-indexing its client.
func (t *Table) Put(l *Lease) {
	if old := t.byKey[l.Key()]; old != nil && old != l {
		t.unindexClient(old)
	}
	t.byKey[l.Key()] = l
	if l.State != Declined {
		// A client that moves to a new address leaves its old binding in
		// the table (until it is removed), but no longer as its current one.
		t.byClient[l.ClientKey()] = l
	}
}

// Delete removes l.
func (t *Table) Delete(l *Lease) {
	if cur := t.byKey[l.Key()]; cur != nil {
		t.unindexClient(cur)
		delete(t.byKey, l.Key())
	}
}

func (t *Table) unindexClient(l *Lease) {
	if t.byClient[l.ClientKey()] == l {
		delete(t.byClient, l.ClientKey())
	}
}

// Each calls fn for every lease; fn must not modify the table.
func (t *Table) Each(fn func(*Lease)) {
	for _, l := range t.byKey {
		fn(l)
	}
}

// Len is the number of leases, offers included.
func (t *Table) Len() int { return len(t.byKey) }

// Event is something the engine publishes once the writes of the answer
// that caused it are durable: lease_granted, lease_renewed, lease_released,
// lease_declined, lease_expired, unknown_device.
type Event struct {
	Kind  string
	Lease Lease
}
