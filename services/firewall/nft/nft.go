// Package nft is the firewall service's nftables table, `inet
// routerd_firewall` (proto/kernel's mark: the service owns the table whole
// and never touches another table or the ruleset). Everything that changes
// per subscriber or per address is a set element: a suspension block, an
// allow-list network, a ban. A change is one batched netlink transaction of
// element additions and deletions; the whole table is written only by
// Rebuild, at the start of a term, as one atomic transaction (the kernel
// swaps the old table for the new one: no packet ever sees it half built).
//
// The table:
//
//	set block4 { type ipv4_addr }                  suspended subscribers
//	set block6 { type ipv6_addr; flags interval }  their IPv6 address or prefix
//	set allow4 { type ipv4_addr; flags interval }  the allow-list
//	set ban4, ban6 { flags timeout }               the ban service's bans
//	set ports { type inet_service }                API and OLT monitor ports
//	set guarded { type inet_service }              = ports while the allow-list has entries
//	chain forward { hook forward priority -10
//	    ip saddr/daddr @block4 drop, ip6 saddr/daddr @block6 drop }
//	set sshban4, sshban6 { flags timeout }          the sshd jail's bans
//	chain input { hook input priority -10; tcp dport @ports jump mgmt;
//	    tcp dport 22 ip saddr @sshban4 drop; tcp dport 22 ip6 saddr @sshban6 drop }
//	chain mgmt { iifname lo return; ip saddr @ban4 drop; ip6 saddr @ban6 drop;
//	    ct state established,related return; tcp dport @guarded jump protect }
//	chain protect { ip saddr @allow4 return; drop }
//
// Suspension drops in forward only, so a suspended subscriber's DHCP to the
// router (input) still works. Loopback (127.0.0.1 and the router's own
// addresses, which reach the router through lo) always passes.
package nft

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
	"routerd.dev/shared/netns"
)

// Table is the name of the service's table (family inet).
const Table = kernel.NftablesTablePrefix + "firewall"

// Set names.
const (
	SetBlock4  = "block4"
	SetBlock6  = "block6"
	SetAllow4  = "allow4"
	SetBan4    = "ban4"
	SetBan6    = "ban6"
	SetPorts   = "ports"
	SetGuarded = "guarded"
	SetSSHBan4 = "sshban4"
	SetSSHBan6 = "sshban6"
)

// Priority of the base chains: before the usual filter (0).
const Priority = -10

// Element is one address or prefix with a comment (the block's id, the
// allow-list entry's comment) and, in ban sets, a timeout.
type Element struct {
	Prefix  netip.Prefix
	Comment string
	Timeout time.Duration
}

// State is the whole table's desired content.
type State struct {
	Ports     []uint16
	Protected bool
	Block4    []Element
	Block6    []Element
	Allow4    []Element
	Ban4      []Element
	Ban6      []Element
	SSHBan4   []Element // the sshd jail's bans (TCP 22)
	SSHBan6   []Element
}

// Kernel is the table in one namespace, with a lasting netlink connection.
// Its methods are safe for concurrent use; each is one transaction.
type Kernel struct {
	mu    sync.Mutex
	c     *nftables.Conn
	table *nftables.Table
	sets  map[string]*nftables.Set
	ports []uint16
}

// Open connects to nftables in ns.
func Open(ns *netns.NS) (*Kernel, error) {
	c, err := dial(ns)
	if err != nil {
		return nil, err
	}
	k := &Kernel{c: c, table: &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}}
	k.sets = map[string]*nftables.Set{
		SetBlock4:  {Table: k.table, Name: SetBlock4, KeyType: nftables.TypeIPAddr},
		SetBlock6:  {Table: k.table, Name: SetBlock6, KeyType: nftables.TypeIP6Addr, Interval: true},
		SetAllow4:  {Table: k.table, Name: SetAllow4, KeyType: nftables.TypeIPAddr, Interval: true},
		SetBan4:    {Table: k.table, Name: SetBan4, KeyType: nftables.TypeIPAddr, HasTimeout: true},
		SetBan6:    {Table: k.table, Name: SetBan6, KeyType: nftables.TypeIP6Addr, HasTimeout: true},
		SetPorts:   {Table: k.table, Name: SetPorts, KeyType: nftables.TypeInetService},
		SetGuarded: {Table: k.table, Name: SetGuarded, KeyType: nftables.TypeInetService},
		SetSSHBan4: {Table: k.table, Name: SetSSHBan4, KeyType: nftables.TypeIPAddr, HasTimeout: true},
		SetSSHBan6: {Table: k.table, Name: SetSSHBan6, KeyType: nftables.TypeIP6Addr, HasTimeout: true},
	}
	return k, nil
}

// dial opens a lasting nftables connection in ns whose socket buffers
// hold a whole rebuild: a batch is one sendmsg, and 100,000 elements are
// megabytes (SO_SNDBUFFORCE and SO_RCVBUFFORCE need CAP_NET_ADMIN, which
// writing nftables needs anyway).
func dial(ns *netns.NS) (*nftables.Conn, error) {
	big := func(c *netlink.Conn) error {
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 64<<20),
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20))
		}); err != nil {
			return err
		}
		return serr
	}
	c, err := nftables.New(nftables.WithNetNSFd(ns.FD()), nftables.AsLasting(), nftables.WithSockOptions(big))
	if err != nil {
		return nil, fmt.Errorf("nftables in %q: %w", ns.Path(), err)
	}
	return c, nil
}

// Close closes the connection (the table stays: blocks and bans hold while
// routerd restarts).
func (k *Kernel) Close() error { return k.c.CloseLasting() }

// Rebuild replaces the table with st in one transaction: created when
// absent, otherwise swapped whole (add, delete, add again in one batch, so
// an absent table is no error and nothing in between is ever seen).
func (k *Kernel) Rebuild(st State) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ports = append([]uint16(nil), st.Ports...)
	c := k.c
	c.AddTable(k.table)
	c.DelTable(k.table)
	c.AddTable(k.table)
	// Fresh set ids for the new table's sets.
	for _, name := range []string{SetBlock4, SetBlock6, SetAllow4, SetBan4, SetBan6, SetPorts, SetGuarded, SetSSHBan4, SetSSHBan6} {
		s := k.sets[name]
		s.ID = 0
		var elems []nftables.SetElement
		var err error
		switch name {
		case SetBlock4:
			elems, err = elements(st.Block4, false)
		case SetBlock6:
			elems, err = elements(st.Block6, true)
		case SetAllow4:
			elems, err = elements(st.Allow4, true)
		case SetBan4:
			elems, err = elements(st.Ban4, false)
		case SetBan6:
			elems, err = elements(st.Ban6, false)
		case SetSSHBan4:
			elems, err = elements(st.SSHBan4, false)
		case SetSSHBan6:
			elems, err = elements(st.SSHBan6, false)
		case SetPorts:
			elems = portElements(st.Ports)
		case SetGuarded:
			if st.Protected {
				elems = portElements(st.Ports)
			}
		}
		if err != nil {
			return err
		}
		// In slices: the element list is one netlink attribute of at most
		// 64 KiB (see elemChunk).
		first := elems
		if len(first) > elemChunk {
			first = first[:elemChunk]
		}
		if err := c.AddSet(s, first); err != nil {
			return fmt.Errorf("nftables: set %s: %w", name, err)
		}
		for i := len(first); i < len(elems); i += elemChunk {
			if err := c.SetAddElements(s, elems[i:min(i+elemChunk, len(elems))]); err != nil {
				return fmt.Errorf("nftables: set %s: %w", name, err)
			}
		}
	}
	accept := nftables.ChainPolicyAccept
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: k.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityRef(Priority), Policy: &accept})
	input := c.AddChain(&nftables.Chain{Name: "input", Table: k.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityRef(Priority), Policy: &accept})
	mgmt := c.AddChain(&nftables.Chain{Name: "mgmt", Table: k.table})
	protect := c.AddChain(&nftables.Chain{Name: "protect", Table: k.table})

	rule := func(ch *nftables.Chain, e ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: k.table, Chain: ch, Exprs: e})
	}
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	ret := &expr.Verdict{Kind: expr.VerdictReturn}
	// forward: a suspended subscriber's traffic, both ways.
	rule(forward, cat(addr4(12), lookup(k.sets[SetBlock4], false), counter(), drop)...)
	rule(forward, cat(addr4(16), lookup(k.sets[SetBlock4], false), counter(), drop)...)
	rule(forward, cat(addr6(8), lookup(k.sets[SetBlock6], false), counter(), drop)...)
	rule(forward, cat(addr6(24), lookup(k.sets[SetBlock6], false), counter(), drop)...)
	// input: the management ports.
	rule(input, cat(tcpDport(), lookup(k.sets[SetPorts], false), &expr.Verdict{Kind: expr.VerdictJump, Chain: "mgmt"})...)
	// The sshd jail: its bans on TCP 22 (loopback is never banned).
	ssh := []expr.Any{&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(22)}}
	rule(input, cat(tcpDport(), ssh, addr4(12), lookup(k.sets[SetSSHBan4], false), counter(), drop)...)
	rule(input, cat(tcpDport(), ssh, addr6(8), lookup(k.sets[SetSSHBan6], false), counter(), drop)...)
	rule(mgmt, cat(iifname("lo"), ret)...)
	rule(mgmt, cat(addr4(12), lookup(k.sets[SetBan4], false), counter(), drop)...)
	rule(mgmt, cat(addr6(8), lookup(k.sets[SetBan6], false), counter(), drop)...)
	rule(mgmt, cat(ctEstablished(), ret)...)
	rule(mgmt, cat(tcpDport(), lookup(k.sets[SetGuarded], false), &expr.Verdict{Kind: expr.VerdictJump, Chain: "protect"})...)
	rule(protect, cat(addr4(12), lookup(k.sets[SetAllow4], false), ret)...)
	rule(protect, counter(), drop)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: writing table %s: %w", Table, err)
	}
	return nil
}

// Batch collects element changes for one transaction.
type Batch struct {
	k   *Kernel
	err error
	n   int
}

// Change runs fn to collect element changes and sends them as one
// transaction: all of them happen or none.
func (k *Kernel) Change(fn func(b *Batch)) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := &Batch{k: k}
	fn(b)
	if b.err != nil {
		// Throw away what was queued: Flush with a serialisation error
		// sends nothing, and the next Flush starts empty.
		_ = k.c.Flush()
		return b.err
	}
	if b.n == 0 {
		return nil
	}
	if err := k.c.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	return nil
}

// Add adds e to the set named set.
func (b *Batch) Add(set string, e Element) { b.op(set, e, true) }

// Delete removes e from the set named set.
func (b *Batch) Delete(set string, e Element) { b.op(set, e, false) }

// Protect fills (on) or empties the guarded ports.
func (b *Batch) Protect(on bool) {
	s := b.k.sets[SetGuarded]
	elems := portElements(b.k.ports)
	if len(elems) == 0 {
		return
	}
	var err error
	if on {
		err = b.k.c.SetAddElements(s, elems)
	} else {
		b.k.c.FlushSet(s)
	}
	b.n++
	b.err = errors.Join(b.err, err)
}

func (b *Batch) op(set string, e Element, add bool) {
	s, ok := b.k.sets[set]
	if !ok {
		b.err = errors.Join(b.err, fmt.Errorf("nftables: no set %q", set))
		return
	}
	elems, err := elements([]Element{e}, s.Interval)
	if err != nil {
		b.err = errors.Join(b.err, err)
		return
	}
	if add {
		err = b.k.c.SetAddElements(s, elems)
	} else {
		// A deletion names the key(s) only.
		for i := range elems {
			elems[i].Comment, elems[i].Timeout = "", 0
		}
		err = b.k.c.SetDeleteElements(s, elems)
	}
	b.n++
	b.err = errors.Join(b.err, err)
}

// Elements lists one set's elements as the kernel has them (intervals
// folded back into prefixes; Timeout is the time left of a timed element).
func (k *Kernel) Elements(set string) ([]Element, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, ok := k.sets[set]
	if !ok {
		return nil, fmt.Errorf("nftables: no set %q", set)
	}
	raw, err := k.c.GetSetElements(s)
	if err != nil {
		return nil, fmt.Errorf("nftables: listing %s: %w", set, err)
	}
	return fold(raw, s.Interval), nil
}

// Exists reports whether the table is in the kernel.
func (k *Kernel) Exists() (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	tables, err := k.c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, err
	}
	for _, t := range tables {
		if t.Name == Table {
			return true, nil
		}
	}
	return false, nil
}

// elements turns prefixes into set elements: one key per address in a
// plain set; a start and an end (the first address after it, omitted at
// the top of the address space) per prefix in an interval set.
func elements(in []Element, interval bool) ([]nftables.SetElement, error) {
	out := make([]nftables.SetElement, 0, len(in)*2)
	for _, e := range in {
		p := e.Prefix.Masked()
		if !p.IsValid() {
			return nil, fmt.Errorf("nftables: invalid prefix %v", e.Prefix)
		}
		if !interval {
			if !p.IsSingleIP() {
				return nil, fmt.Errorf("nftables: %v is not one address", p)
			}
			out = append(out, nftables.SetElement{Key: p.Addr().AsSlice(), Comment: e.Comment, Timeout: e.Timeout})
			continue
		}
		out = append(out, nftables.SetElement{Key: p.Addr().AsSlice(), Comment: e.Comment})
		if end, ok := after(p); ok {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out, nil
}

// after is the first address after p, false past the end of the space.
func after(p netip.Prefix) (netip.Addr, bool) {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := bits; i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	last, _ := netip.AddrFromSlice(b)
	next := last.Next()
	return next, next.IsValid()
}

// fold turns the kernel's elements back into prefixes.
func fold(raw []nftables.SetElement, interval bool) []Element {
	var out []Element
	if !interval {
		for _, e := range raw {
			a, ok := netip.AddrFromSlice(e.Key)
			if !ok {
				continue
			}
			out = append(out, Element{Prefix: netip.PrefixFrom(a, a.BitLen()), Comment: e.Comment, Timeout: e.Expires})
		}
		return out
	}
	// Interval sets come back as starts and ends in any order: sort the
	// boundaries and pair each start with the next end.
	type bound struct {
		a       netip.Addr
		end     bool
		comment string
	}
	var bs []bound
	for _, e := range raw {
		a, ok := netip.AddrFromSlice(e.Key)
		if !ok {
			continue
		}
		bs = append(bs, bound{a: a, end: e.IntervalEnd, comment: e.Comment})
	}
	for i := 1; i < len(bs); i++ { // insertion sort: sets here are small
		for j := i; j > 0 && bs[j].a.Less(bs[j-1].a); j-- {
			bs[j], bs[j-1] = bs[j-1], bs[j]
		}
	}
	for i := 0; i < len(bs); i++ {
		if bs[i].end {
			continue
		}
		start := bs[i]
		var last netip.Addr
		if i+1 < len(bs) && bs[i+1].end {
			last = bs[i+1].a.Prev()
			i++
		} else {
			last = maxAddr(start.a)
		}
		out = append(out, Element{Prefix: rangePrefix(start.a, last), Comment: start.comment})
	}
	return out
}

func maxAddr(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	var b [16]byte
	for i := range b {
		b[i] = 0xff
	}
	return netip.AddrFrom16(b)
}

// rangePrefix is the prefix spanning first..last (the widest prefix at
// first that ends at last; the sets only ever hold whole prefixes).
func rangePrefix(first, last netip.Addr) netip.Prefix {
	for bits := 0; bits <= first.BitLen(); bits++ {
		p := netip.PrefixFrom(first, bits)
		if p.Masked().Addr() != first {
			continue
		}
		if end, ok := after(p); (ok && end.Prev() == last) || (!ok && last == maxAddr(first)) {
			return p
		}
	}
	return netip.PrefixFrom(first, first.BitLen())
}

func portElements(ports []uint16) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, len(ports))
	for _, p := range ports {
		out = append(out, nftables.SetElement{Key: binaryutil.BigEndian.PutUint16(p)})
	}
	return out
}

func cat(parts ...any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		switch v := p.(type) {
		case []expr.Any:
			out = append(out, v...)
		case expr.Any:
			out = append(out, v)
		}
	}
	return out
}

// addr4 loads the IPv4 header's address at off (12 source, 16
// destination) into register 1, for IPv4 packets only.
func addr4(off uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
	}
}

// addr6 is addr4 for IPv6 (8 source, 24 destination).
func addr6(off uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 16},
	}
}

func tcpDport() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
}

func lookup(s *nftables.Set, invert bool) expr.Any {
	return &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, Invert: invert}
}

func counter() expr.Any { return &expr.Counter{} }

func ctEstablished() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

func iifname(name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// Cover is the set of prefixes an interval set holds for in: the prefixes
// no other prefix of in contains (equal ones once, the first's comment
// kept), sorted. The kernel's interval sets must never receive overlapping
// intervals, so overlapping entries (an allow-list network inside another,
// two blocks of one prefix) are held by their cover.
func Cover(in []Element) []Element {
	ps := make([]Element, 0, len(in))
	for _, e := range in {
		e.Prefix = e.Prefix.Masked()
		ps = append(ps, e)
	}
	// Widest first at each start, so a prefix is dropped when an earlier
	// one contains it.
	sort.SliceStable(ps, func(i, j int) bool {
		if c := ps[i].Prefix.Addr().Compare(ps[j].Prefix.Addr()); c != 0 {
			return c < 0
		}
		return ps[i].Prefix.Bits() < ps[j].Prefix.Bits()
	})
	var out []Element
	for _, e := range ps {
		if n := len(out); n > 0 && out[n-1].Prefix.Overlaps(e.Prefix) {
			continue // sorted by start, widest first: the earlier contains it
		}
		out = append(out, e)
	}
	return out
}

// Sync changes the set named set from holding before to holding after
// (both as Cover returns them): deletes what only before has, adds what
// only after has, in this batch.
func (b *Batch) Sync(set string, before, after []Element) {
	type key struct {
		p netip.Prefix
		c string
	}
	inBefore := make(map[key]bool, len(before))
	for _, e := range before {
		inBefore[key{e.Prefix, e.Comment}] = true
	}
	inAfter := make(map[key]bool, len(after))
	for _, e := range after {
		inAfter[key{e.Prefix, e.Comment}] = true
	}
	for _, e := range before {
		if !inAfter[key{e.Prefix, e.Comment}] {
			b.Delete(set, e)
		}
	}
	for _, e := range after {
		if !inBefore[key{e.Prefix, e.Comment}] {
			b.Add(set, e)
		}
	}
}
