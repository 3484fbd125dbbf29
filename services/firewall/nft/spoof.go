package nft

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
	"routerd.dev/shared/netns"
)

// Anti-spoofing is its own table, `netdev routerd_firewall_spoof`: one base
// chain on the ingress hook of each enforced interface (sp_<iface>), so IP
// and ARP are checked before routing, for forwarded traffic and for the
// router itself alike, and the sets every chain shares:
//
//	set bind4 { type ifname . ether_addr . ipv4_addr }                  IPv4 pairs (and ARP senders)
//	set bind6_128, bind6_64, bind6_60, bind6_56, bind6_48
//	    { type ifname . ether_addr . ipv6_addr }                        IPv6 addresses and prefixes of
//	                                                                    those lengths (hash sets: the
//	                                                                    source masked to the length)
//	set bind6 { type ifname . ether_addr . ipv6_addr; flags interval }  prefixes of other lengths
//	set exempt4, exempt6 { flags interval }                             passing from any MAC
//
//	chain sp_vlan100 { type filter hook ingress device "vlan100" priority -500; policy accept;
//	    ether type arp: sender 0.0.0.0 (probes), a bound pair, an exempt sender pass;
//	        else limit 10/s log group G prefix "ROUTER_ARPSPOOF: "; counter drop
//	    ether type ip6: ICMPv6 RA (134) and redirect (137) logged and dropped;
//	        link-local and :: sources, exempt, bound pairs pass; else logged, counter drop
//	    ether type ip: DHCP (udp 68 -> 67) passes (unregistered devices still get
//	        their lease); exempt, bound pairs pass; else logged, counter drop }
//
// A binding is one element; an interface's mode changing is its chain
// added or removed.

// elemChunk is how many elements one netlink message carries.
const elemChunk = 400

// SpoofTable is the anti-spoofing table's name (family netdev).
const SpoofTable = kernel.FirewallTable + "_spoof"

// Log prefixes of the drops (Document 2).
const (
	PrefixSpoof    = "ROUTER_SPOOF: "
	PrefixARPSpoof = "ROUTER_ARPSPOOF: "
)

// Set names of the anti-spoofing table.
const (
	SetBind4   = "bind4"
	SetBind6   = "bind6"
	SetExempt4 = "exempt4"
	SetExempt6 = "exempt6"
)

// v6Lengths are the IPv6 prefix lengths with a hash set of their own; a
// binding of another length goes to the interval set bind6 (a pipapo set,
// whose every change copies its whole lookup table: tens of milliseconds
// at tens of thousands of elements).
var v6Lengths = []int{128, 64, 60, 56, 48}

func v6Set(bits int) string {
	for _, l := range v6Lengths {
		if l == bits {
			return fmt.Sprintf("%s_%d", SetBind6, l)
		}
	}
	return SetBind6
}

// spoofSets lists the table's sets in the order they are written.
func spoofSets() []string {
	out := []string{SetBind4}
	for _, l := range v6Lengths {
		out = append(out, v6Set(l))
	}
	return append(out, SetBind6, SetExempt4, SetExempt6)
}

// Binding is one MAC and address (or prefix) on an interface.
type Binding struct {
	Iface  string
	MAC    net.HardwareAddr
	Prefix netip.Prefix
}

// Key identifies a binding ("iface mac prefix").
func (b Binding) Key() string { return b.Iface + " " + b.MAC.String() + " " + b.Prefix.String() }

// SpoofState is the whole anti-spoofing table's desired content.
type SpoofState struct {
	Ifaces   []string // enforced interfaces (that exist)
	Bindings []Binding
	Exempt   []netip.Prefix
	LogGroup uint16 // 0: no logging
}

// Spoof is the anti-spoofing table in one namespace.
type Spoof struct {
	mu     sync.Mutex
	c      *nftables.Conn
	table  *nftables.Table
	sets   map[string]*nftables.Set
	group  uint16
	ifaces map[string]bool
}

// OpenSpoof connects to nftables in ns.
func OpenSpoof(ns *netns.NS) (*Spoof, error) {
	c, err := dial(ns)
	if err != nil {
		return nil, err
	}
	s := &Spoof{c: c, table: &nftables.Table{Name: SpoofTable, Family: nftables.TableFamilyNetdev}, ifaces: map[string]bool{}}
	s.sets = map[string]*nftables.Set{
		SetBind4: {Table: s.table, Name: SetBind4, Concatenation: true,
			KeyType: nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeEtherAddr, nftables.TypeIPAddr)},
		SetBind6: {Table: s.table, Name: SetBind6, Concatenation: true, Interval: true,
			KeyType: nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeEtherAddr, nftables.TypeIP6Addr)},
		SetExempt4: {Table: s.table, Name: SetExempt4, KeyType: nftables.TypeIPAddr, Interval: true},
		SetExempt6: {Table: s.table, Name: SetExempt6, KeyType: nftables.TypeIP6Addr, Interval: true},
	}
	for _, l := range v6Lengths {
		n := v6Set(l)
		s.sets[n] = &nftables.Set{Table: s.table, Name: n, Concatenation: true,
			KeyType: nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeEtherAddr, nftables.TypeIP6Addr)}
	}
	return s, nil
}

// Close closes the connection; the table stays.
func (s *Spoof) Close() error { return s.c.CloseLasting() }

// Remove deletes the table (the feature switched off); absent is no error.
func (s *Spoof) Remove() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.AddTable(s.table)
	s.c.DelTable(s.table)
	s.ifaces = map[string]bool{}
	if err := s.c.Flush(); err != nil {
		return fmt.Errorf("nftables: removing %s: %w", SpoofTable, err)
	}
	return nil
}

// Rebuild replaces the table with st in one transaction.
func (s *Spoof) Rebuild(st SpoofState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.c
	c.AddTable(s.table)
	c.DelTable(s.table)
	c.AddTable(s.table)
	s.group = st.LogGroup
	all := map[string][]nftables.SetElement{}
	for _, b := range st.Bindings {
		e, set, err := bindElement(b)
		if err != nil {
			return err
		}
		all[set] = append(all[set], e)
	}
	var ex4, ex6 []Element
	for _, p := range st.Exempt {
		if p.Addr().Is4() {
			ex4 = append(ex4, Element{Prefix: p})
		} else {
			ex6 = append(ex6, Element{Prefix: p})
		}
	}
	e4, err := elements(Cover(ex4), true)
	if err != nil {
		return err
	}
	e6, err := elements(Cover(ex6), true)
	if err != nil {
		return err
	}
	all[SetExempt4], all[SetExempt6] = e4, e6
	for _, name := range spoofSets() {
		elems := all[name]
		set := s.sets[name]
		set.ID = 0
		// Large sets go in slices: the element list is one netlink
		// attribute, whose length is 16 bits (an IPv6 binding with its
		// range end takes about 110 bytes), and a longer one is cut short
		// without an error.
		first := elems
		if len(first) > elemChunk {
			first = first[:elemChunk]
		}
		if err := c.AddSet(set, first); err != nil {
			return fmt.Errorf("nftables: set %s: %w", name, err)
		}
		for i := len(first); i < len(elems); i += elemChunk {
			if err := c.SetAddElements(set, elems[i:min(i+elemChunk, len(elems))]); err != nil {
				return err
			}
		}
	}
	s.ifaces = map[string]bool{}
	for _, ifc := range st.Ifaces {
		s.addChain(ifc)
		s.ifaces[ifc] = true
	}
	if err := c.Flush(); err != nil {
		s.ifaces = map[string]bool{}
		return fmt.Errorf("nftables: writing table %s: %w", SpoofTable, err)
	}
	return nil
}

// SpoofBatch collects anti-spoofing changes for one transaction.
type SpoofBatch struct {
	s      *Spoof
	err    error
	n      int
	added  []string
	gone   []string
	exempt [2][2][]Element // [v4,v6][before,after]
}

// Change runs fn and sends what it collected as one transaction.
func (s *Spoof) Change(fn func(b *SpoofBatch)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &SpoofBatch{s: s}
	fn(b)
	if b.err != nil {
		_ = s.c.Flush()
		return b.err
	}
	if b.n == 0 {
		return nil
	}
	if err := s.c.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	for _, i := range b.added {
		s.ifaces[i] = true
	}
	for _, i := range b.gone {
		delete(s.ifaces, i)
	}
	return nil
}

// Bind adds a binding.
func (b *SpoofBatch) Bind(x Binding) { b.bind(x, true) }

// Unbind removes a binding.
func (b *SpoofBatch) Unbind(x Binding) { b.bind(x, false) }

func (b *SpoofBatch) bind(x Binding, add bool) {
	e, name, err := bindElement(x)
	if err != nil {
		b.err = err
		return
	}
	set := b.s.sets[name]
	if add {
		err = b.s.c.SetAddElements(set, []nftables.SetElement{e})
	} else {
		err = b.s.c.SetDeleteElements(set, []nftables.SetElement{e})
	}
	b.n++
	if err != nil {
		b.err = err
	}
}

// Enforce adds the chain of iface; Release removes it.
func (b *SpoofBatch) Enforce(iface string) {
	if b.s.ifaces[iface] {
		return
	}
	b.s.addChain(iface)
	b.added = append(b.added, iface)
	b.n++
}

// Release removes iface's chain.
func (b *SpoofBatch) Release(iface string) {
	if !b.s.ifaces[iface] {
		return
	}
	b.s.c.DelChain(&nftables.Chain{Name: chainName(iface), Table: b.s.table})
	b.gone = append(b.gone, iface)
	b.n++
}

// Enforced lists the interfaces with a chain.
func (s *Spoof) Enforced() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.ifaces))
	for i := range s.ifaces {
		out = append(out, i)
	}
	sort.Strings(out)
	return out
}

func chainName(iface string) string { return "sp_" + iface }

// Counters are one interface's drop counters.
type Counters struct{ IP4, IP6, ARP uint64 }

// Drops reads each enforced interface's drop counters and the rule count
// of its chain.
func (s *Spoof) Drops() (map[string]Counters, map[string]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]Counters{}
	rules := map[string]int{}
	for ifc := range s.ifaces {
		rs, err := s.c.GetRules(s.table, &nftables.Chain{Name: chainName(ifc), Table: s.table})
		if err != nil {
			return nil, nil, fmt.Errorf("nftables: rules of %s: %w", chainName(ifc), err)
		}
		rules[ifc] = len(rs)
		var c Counters
		for _, r := range rs {
			kind := string(r.UserData)
			for _, e := range r.Exprs {
				if ctr, ok := e.(*expr.Counter); ok {
					switch kind {
					case "drop4":
						c.IP4 += ctr.Packets
					case "drop6":
						c.IP6 += ctr.Packets
					case "droparp":
						c.ARP += ctr.Packets
					}
				}
			}
		}
		out[ifc] = c
	}
	return out, rules, nil
}

// Count returns how many elements bind4 and bind6 hold in the kernel.
func (s *Spoof) Count() (int, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e4, err := s.c.GetSetElements(s.sets[SetBind4])
	if err != nil {
		return 0, 0, err
	}
	n6 := 0
	for _, name := range spoofSets() {
		if name == SetBind4 || name == SetExempt4 || name == SetExempt6 {
			continue
		}
		e6, err := s.c.GetSetElements(s.sets[name])
		if err != nil {
			return 0, 0, err
		}
		for _, e := range e6 {
			if !e.IntervalEnd {
				n6++
			}
		}
	}
	return len(e4), n6, nil
}

// bindElement is a binding's set element and the set it goes in:
// ifname . ether_addr . address, each field padded to 4 bytes; an IPv6
// prefix of a length without a set of its own as a range.
func bindElement(b Binding) (nftables.SetElement, string, error) {
	if len(b.MAC) != 6 || b.Iface == "" || len(b.Iface) >= unix.IFNAMSIZ || !b.Prefix.IsValid() {
		return nftables.SetElement{}, "", fmt.Errorf("nftables: bad binding %s", b.Key())
	}
	head := make([]byte, 16+8)
	copy(head, b.Iface)
	copy(head[16:], b.MAC)
	p := b.Prefix.Masked()
	if p.Addr().Is4() {
		if !p.IsSingleIP() {
			return nftables.SetElement{}, "", fmt.Errorf("nftables: IPv4 binding %s is not one address", p)
		}
		return nftables.SetElement{Key: append(head, p.Addr().AsSlice()...)}, SetBind4, nil
	}
	key := append(append([]byte(nil), head...), p.Addr().AsSlice()...)
	if set := v6Set(p.Bits()); set != SetBind6 {
		return nftables.SetElement{Key: key}, set, nil
	}
	end := append(append([]byte(nil), head...), lastAddr(p).AsSlice()...)
	return nftables.SetElement{Key: key, KeyEnd: end}, SetBind6, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// addChain queues iface's base chain and its rules.
func (s *Spoof) addChain(iface string) {
	c := s.c
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: chainName(iface), Table: s.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookIngress, Priority: nftables.ChainPriorityRef(-500), Device: iface, Policy: &accept})
	rule := func(tag string, e ...expr.Any) {
		r := &nftables.Rule{Table: s.table, Chain: ch, Exprs: e}
		if tag != "" {
			r.UserData = []byte(tag)
		}
		c.AddRule(r)
	}
	ok := &expr.Verdict{Kind: expr.VerdictAccept}
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	etherType := func(t uint16) []expr.Any {
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(t)},
		}
	}
	nh := func(off, n uint32, reg uint32) expr.Any {
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}
	}
	eq := func(reg uint32, data []byte) expr.Any { return &expr.Cmp{Op: expr.CmpOpEq, Register: reg, Data: data} }
	lookup := func(name string, reg uint32) expr.Any {
		set := s.sets[name]
		return &expr.Lookup{SourceRegister: reg, SetName: set.Name, SetID: set.ID}
	}
	// iifname . <mac> . <addr> into the 32-bit registers from 8.
	pair := func(mac expr.Any, addr expr.Any) []expr.Any {
		return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 8}, mac, addr}
	}
	logged := func(prefix string) []expr.Any {
		if s.group == 0 {
			return nil
		}
		return []expr.Any{
			&expr.Limit{Type: expr.LimitTypePkts, Rate: 10, Unit: expr.LimitTimeSecond, Burst: 20},
			&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX, Group: s.group, Data: []byte(prefix)},
		}
	}
	const (
		arp  = 0x0806
		ipv4 = 0x0800
		ipv6 = 0x86dd
	)
	// ARP.
	rule("", cat(etherType(arp), nh(14, 4, 1), eq(1, []byte{0, 0, 0, 0}), ok)...)
	rule("", cat(etherType(arp), pair(&expr.Payload{DestRegister: 12, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 6},
		nh(14, 4, 14)), lookup(SetBind4, 8), ok)...)
	rule("", cat(etherType(arp), nh(14, 4, 1), lookup(SetExempt4, 1), ok)...)
	if l := logged(PrefixARPSpoof); l != nil {
		rule("", cat(etherType(arp), l)...)
	}
	rule("droparp", cat(etherType(arp), &expr.Counter{}, drop)...)
	// IPv6: router advertisements and redirects from subscribers.
	icmp6 := func() []expr.Any {
		out := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			eq(1, []byte{unix.IPPROTO_ICMPV6}),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		}
		return out
	}
	for _, t := range []byte{134, 137} {
		if l := logged(PrefixSpoof); l != nil {
			rule("", cat(etherType(ipv6), icmp6(), eq(1, []byte{t}), l)...)
		}
		rule("drop6", cat(etherType(ipv6), icmp6(), eq(1, []byte{t}), &expr.Counter{}, drop)...)
	}
	linkLocal := []expr.Any{
		nh(8, 2, 1),
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: []byte{0xff, 0xc0}, Xor: []byte{0, 0}},
		eq(1, []byte{0xfe, 0x80}),
	}
	rule("", cat(etherType(ipv6), linkLocal, ok)...)
	rule("", cat(etherType(ipv6), nh(8, 16, 1), eq(1, make([]byte, 16)), ok)...)
	rule("", cat(etherType(ipv6), nh(8, 16, 1), lookup(SetExempt6, 1), ok)...)
	for _, l := range v6Lengths {
		e := cat(etherType(ipv6), pair(&expr.Payload{DestRegister: 12, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
			nh(8, 16, 14)))
		if l < 128 {
			mask := lastAddr(netip.PrefixFrom(netip.IPv6Unspecified(), 0)).AsSlice()
			for i := l; i < 128; i++ {
				mask[i/8] &^= 0x80 >> (i % 8)
			}
			e = append(e, &expr.Bitwise{SourceRegister: 14, DestRegister: 14, Len: 16, Mask: mask, Xor: make([]byte, 16)})
		}
		rule("", cat(e, lookup(v6Set(l), 8), ok)...)
	}
	rule("", cat(etherType(ipv6), pair(&expr.Payload{DestRegister: 12, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
		nh(8, 16, 14)), lookup(SetBind6, 8), ok)...)
	if l := logged(PrefixSpoof); l != nil {
		rule("", cat(etherType(ipv6), l)...)
	}
	rule("drop6", cat(etherType(ipv6), &expr.Counter{}, drop)...)
	// IPv4: DHCP to the router, then the pairs.
	rule("", cat(etherType(ipv4),
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, eq(1, []byte{unix.IPPROTO_UDP}),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 4},
		eq(1, []byte{0, 68, 0, 67}), ok)...)
	rule("", cat(etherType(ipv4), nh(12, 4, 1), lookup(SetExempt4, 1), ok)...)
	rule("", cat(etherType(ipv4), pair(&expr.Payload{DestRegister: 12, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
		nh(12, 4, 14)), lookup(SetBind4, 8), ok)...)
	if l := logged(PrefixSpoof); l != nil {
		rule("", cat(etherType(ipv4), l)...)
	}
	rule("drop4", cat(etherType(ipv4), &expr.Counter{}, drop)...)
}

// SyncExempt changes the exempt sets from before to after.
func (b *SpoofBatch) SyncExempt(before, after []netip.Prefix) {
	split := func(ps []netip.Prefix) (v4, v6 []Element) {
		for _, p := range ps {
			if p.Addr().Is4() {
				v4 = append(v4, Element{Prefix: p})
			} else {
				v6 = append(v6, Element{Prefix: p})
			}
		}
		return Cover(v4), Cover(v6)
	}
	b4, b6 := split(before)
	a4, a6 := split(after)
	for _, x := range []struct {
		set      string
		from, to []Element
		interval bool
	}{{SetExempt4, b4, a4, true}, {SetExempt6, b6, a6, true}} {
		inBefore := map[netip.Prefix]bool{}
		for _, e := range x.from {
			inBefore[e.Prefix] = true
		}
		inAfter := map[netip.Prefix]bool{}
		for _, e := range x.to {
			inAfter[e.Prefix] = true
		}
		set := b.s.sets[x.set]
		for _, e := range x.from {
			if !inAfter[e.Prefix] {
				el, err := elements([]Element{e}, true)
				if err == nil {
					err = b.s.c.SetDeleteElements(set, el)
				}
				if err != nil {
					b.err = err
				}
				b.n++
			}
		}
		for _, e := range x.to {
			if !inBefore[e.Prefix] {
				el, err := elements([]Element{e}, true)
				if err == nil {
					err = b.s.c.SetAddElements(set, el)
				}
				if err != nil {
					b.err = err
				}
				b.n++
			}
		}
	}
}

// ParseMAC reads a MAC in any of the spec's forms.
func ParseMAC(s string) (net.HardwareAddr, error) {
	hex := strings.NewReplacer(":", "", "-", "", ".", "").Replace(strings.ToLower(s))
	if len(hex) != 12 {
		return nil, fmt.Errorf("bad MAC %q", s)
	}
	var parts []string
	for i := 0; i < 12; i += 2 {
		parts = append(parts, hex[i:i+2])
	}
	return net.ParseMAC(strings.Join(parts, ":"))
}
