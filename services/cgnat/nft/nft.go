// Package nft is the cgnat service's nftables table, `ip routerd_cgnat`
// (proto/kernel.CGNATTable), written through github.com/google/nftables in
// batched netlink transactions. The service owns the table whole and
// touches nothing else.
//
//	table ip routerd_cgnat {
//	  set cg_exempt { type ipv4_addr; flags interval; }      # CGNAT exempt networks
//	  map cg_subs { type ipv4_addr : ipv4_addr . inet_service (a range) }
//	                            # one element a subscriber: private -> public . first port - public . last port
//	  chain postrouting { type nat hook postrouting priority srcnat;
//	    oifname W ip saddr @cg_exempt accept                           # "cgnat exempt"
//	    oifname W meta l4proto tcp snat ip to ip saddr map @cg_subs   # "cgnat tcp" (also udp, icmp: the query id)
//	    oifname W snat ip to ip saddr map @cg_subs                     # "cgnat other": the address only
//	    oifname X ip saddr E accept; oifname X snat ip to A-B          # "nat X ...": a NAT pool
//	  }
//	  chain prerouting { type nat hook prerouting priority dstnat;
//	    [ip daddr P | fib daddr type local] meta l4proto tcp th dport N dnat ip to C:M   # "pf ..."
//	  }
//	  chain forward { type filter hook forward priority filter; policy accept;
//	    ip daddr C meta l4proto tcp th dport M ct status dnat accept                      # "pf ..."
//	  }
//	}
//
// Each rule carries its identity in its user data (the comment nft prints),
// so a reconcile compares rules by identity and replaces only those that
// differ. The map's data is the 16 bytes the kernel's nat expression reads
// as address min . port min . address max . port max (what nft writes for
// `snat ip to ip saddr map { a : b . p-q }`); the map is a hash, not an
// interval set, so each subscriber is one element and a change one
// element operation.
package nft

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// Names of the table's objects.
const (
	Table      = kernel.CGNATTable
	SetExempt  = "cg_exempt"
	MapSubs    = "cg_subs"
	ChainPost  = "postrouting"
	ChainPre   = "prerouting"
	ChainFwd   = "forward"
	elemsChunk = 1000 // elements per netlink message (an attribute is at most 64 KiB)
)

// Element is one subscriber's mapping.
type Element struct {
	Private   netip.Addr
	Public    netip.Addr
	PortStart uint16
	PortEnd   uint16
}

// Rule is a rule of the table by identity: Chain, ID (the user data),
// and the expressions to build it from.
type Rule struct {
	Chain string
	ID    string
	Exprs []expr.Any
}

// K is the table in one namespace.
type K struct {
	fd      int
	nsPath  string
	table   *nftables.Table
	exempt  *nftables.Set
	subs    *nftables.Set
	chains  map[string]*nftables.Chain
	natType nftables.SetDatatype
}

// New returns the table of the namespace with file descriptor fd (its
// path, "" for routerd's own, is for the nft listings).
func New(fd int, nsPath string) *K {
	t := &nftables.Table{Name: Table, Family: nftables.TableFamilyIPv4}
	data := nftables.SetDatatype{Name: "ipv4_addr . inet_service", Bytes: 16}
	data.SetNFTMagic(nftables.TypeIPAddr.GetNFTMagic()<<6 | nftables.TypeInetService.GetNFTMagic())
	accept, filterPrio := nftables.ChainPolicyAccept, nftables.ChainPriorityFilter
	return &K{
		fd: fd, nsPath: nsPath, table: t, natType: data,
		exempt: &nftables.Set{Table: t, Name: SetExempt, KeyType: nftables.TypeIPAddr, Interval: true},
		subs:   &nftables.Set{Table: t, Name: MapSubs, KeyType: nftables.TypeIPAddr, DataType: data, IsMap: true},
		chains: map[string]*nftables.Chain{
			ChainPost: {Name: ChainPost, Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept},
			ChainPre:  {Name: ChainPre, Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept},
			ChainFwd:  {Name: ChainFwd, Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookForward, Priority: filterPrio, Policy: &accept},
		},
	}
}

// conn opens a connection whose socket buffers hold a whole batch of a
// hundred thousand elements (one transaction).
func (k *K) conn() (*nftables.Conn, error) {
	return nftables.New(nftables.WithNetNSFd(k.fd), nftables.WithSockOptions(func(c *netlink.Conn) error {
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		err = rc.Control(func(fd uintptr) {
			serr = errors.Join(
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUFFORCE, 64<<20),
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 16<<20))
		})
		if serr != nil {
			// Not privileged to force: the defaults, with smaller batches.
			return nil
		}
		return err
	}))
}

// Create makes the table, its sets and chains afresh (deleting a table of
// that name first when there is one), with rules, exempt networks and
// elements, in one transaction.
func (k *K) Create(rules []Rule, exempt []netip.Prefix, elems []Element) error {
	c, err := k.conn()
	if err != nil {
		return err
	}
	if t, _ := c.ListTableOfFamily(Table, nftables.TableFamilyIPv4); t != nil {
		c.DelTable(k.table)
	}
	c.AddTable(k.table)
	if err := c.AddSet(k.exempt, exemptElems(exempt)); err != nil {
		return err
	}
	if err := c.AddSet(k.subs, nil); err != nil {
		return err
	}
	for _, name := range []string{ChainPost, ChainPre, ChainFwd} {
		c.AddChain(k.chains[name])
	}
	for _, r := range rules {
		c.AddRule(k.rule(r))
	}
	if err := k.addElems(c, elems); err != nil {
		return err
	}
	return c.Flush()
}

func (k *K) rule(r Rule) *nftables.Rule {
	return &nftables.Rule{Table: k.table, Chain: k.chains[r.Chain], Exprs: r.Exprs,
		UserData: userdata.AppendString(nil, userdata.TypeComment, r.ID)}
}

func (k *K) addElems(c *nftables.Conn, elems []Element) error {
	for len(elems) > 0 {
		n := min(len(elems), elemsChunk)
		vals := make([]nftables.SetElement, n)
		for i, e := range elems[:n] {
			vals[i] = e.set()
		}
		if err := c.SetAddElements(k.subs, vals); err != nil {
			return err
		}
		elems = elems[n:]
	}
	return nil
}

func (e Element) set() nftables.SetElement {
	v := make([]byte, 16)
	pub := e.Public.As4()
	copy(v[0:4], pub[:])
	binary.BigEndian.PutUint16(v[4:6], e.PortStart)
	copy(v[8:12], pub[:])
	binary.BigEndian.PutUint16(v[12:14], e.PortEnd)
	key := e.Private.As4()
	return nftables.SetElement{Key: key[:], Val: v}
}

func exemptElems(ps []netip.Prefix) []nftables.SetElement {
	var out []nftables.SetElement
	for _, p := range ps {
		p = p.Masked()
		start := p.Addr().As4()
		out = append(out, nftables.SetElement{Key: start[:]})
		// The interval ends at the first address past the network.
		endN := binary.BigEndian.Uint32(start[:]) + uint32(1)<<(32-p.Bits())
		if p.Bits() == 0 || endN == 0 {
			continue // up to the end of the space: no end element
		}
		var end [4]byte
		binary.BigEndian.PutUint32(end[:], endN)
		out = append(out, nftables.SetElement{Key: end[:], IntervalEnd: true})
	}
	// An interval set's first element must mark the gap before 0.0.0.0
	// the way nft does: the kernel needs no more than the pairs above.
	return out
}

// Batch is a set of changes made in one transaction.
type Batch struct {
	// DelElems are the private addresses whose elements go (before
	// AddElems, so a changed element is a delete and an add).
	DelElems []netip.Addr
	AddElems []Element
	// DelRules are handles of rules to delete; AddRules are appended to
	// their chains, InsertRules put first (in the order given).
	DelRules    []Handle
	AddRules    []Rule
	InsertRules []Rule
	// Exempt, when not nil, replaces the exempt set's content.
	Exempt *[]netip.Prefix
}

// Handle names one rule in the kernel.
type Handle struct {
	Chain  string
	Handle uint64
}

// Empty says whether the batch changes nothing.
func (b *Batch) Empty() bool {
	return len(b.DelElems)+len(b.AddElems)+len(b.DelRules)+len(b.AddRules)+len(b.InsertRules) == 0 && b.Exempt == nil
}

// Apply makes the batch's changes in one transaction.
func (k *K) Apply(b Batch) error {
	if b.Empty() {
		return nil
	}
	c, err := k.conn()
	if err != nil {
		return err
	}
	for len(b.DelElems) > 0 {
		n := min(len(b.DelElems), elemsChunk)
		vals := make([]nftables.SetElement, n)
		for i, a := range b.DelElems[:n] {
			key := a.As4()
			vals[i] = nftables.SetElement{Key: key[:]}
		}
		if err := c.SetDeleteElements(k.subs, vals); err != nil {
			return err
		}
		b.DelElems = b.DelElems[n:]
	}
	if err := k.addElems(c, b.AddElems); err != nil {
		return err
	}
	for _, h := range b.DelRules {
		if err := c.DelRule(&nftables.Rule{Table: k.table, Chain: k.chains[h.Chain], Handle: h.Handle}); err != nil {
			return err
		}
	}
	for _, r := range b.AddRules {
		c.AddRule(k.rule(r))
	}
	for i := len(b.InsertRules) - 1; i >= 0; i-- {
		c.InsertRule(k.rule(b.InsertRules[i]))
	}
	if b.Exempt != nil {
		c.FlushSet(k.exempt)
		if els := exemptElems(*b.Exempt); len(els) > 0 {
			if err := c.SetAddElements(k.exempt, els); err != nil {
				return err
			}
		}
	}
	return c.Flush()
}

// State is what the kernel holds of the table.
type State struct {
	// Exists is false when there is no table (or not the layout this
	// package makes: then Create starts it afresh).
	Exists bool
	// Rules maps each rule's identity to its handle, per chain, in order.
	Rules map[string][]RuleRef
	Elems map[netip.Addr]Element
}

// RuleRef is one rule found in the kernel.
type RuleRef struct {
	ID     string
	Handle uint64
}

// Read lists the table: its rules by identity and the map's elements.
func (k *K) Read() (*State, error) { return k.ReadExpecting(-1) }

// ReadExpecting is Read when the caller expects n elements: a first dump
// of exactly n is taken as whole, saving the second dump that otherwise
// confirms the count.
func (k *K) ReadExpecting(n int) (*State, error) {
	c, err := k.conn()
	if err != nil {
		return nil, err
	}
	st := &State{Rules: map[string][]RuleRef{}, Elems: map[netip.Addr]Element{}}
	if t, err := c.ListTableOfFamily(Table, nftables.TableFamilyIPv4); err != nil || t == nil {
		return st, nil
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, err
	}
	found := 0
	for _, ch := range chains {
		if ch.Table.Name != Table {
			continue
		}
		want, ok := k.chains[ch.Name]
		if !ok || ch.Hooknum == nil || *ch.Hooknum != *want.Hooknum || ch.Type != want.Type {
			return st, nil // not our layout: Exists false, Create redoes it
		}
		found++
	}
	sets, err := c.GetSets(k.table)
	if err != nil {
		return nil, err
	}
	var subs *nftables.Set
	for _, s := range sets {
		switch s.Name {
		case MapSubs:
			if s.IsMap && s.DataType.Bytes == 16 {
				subs = s
			}
		case SetExempt:
		default:
			return st, nil
		}
	}
	if found != len(k.chains) || subs == nil || len(sets) != 2 {
		return st, nil
	}
	for name, ch := range k.chains {
		rules, err := c.GetRules(k.table, ch)
		if err != nil {
			return nil, err
		}
		for _, r := range rules {
			id, _ := userdata.GetString(r.UserData, userdata.TypeComment)
			st.Rules[name] = append(st.Rules[name], RuleRef{ID: id, Handle: r.Handle})
		}
	}
	// A dump that runs while the kernel resizes the hash table can miss
	// elements (google/nftables does not report NLM_F_DUMP_INTR): read
	// until two dumps agree.
	var els []nftables.SetElement
	for try, prev := 0, -1; try < 5; try++ {
		if els, err = c.GetSetElements(subs); err != nil {
			return nil, err
		}
		if len(els) == prev || len(els) == n {
			break
		}
		prev = len(els)
	}
	for _, e := range els {
		if len(e.Key) != 4 || len(e.Val) != 16 {
			continue
		}
		priv := netip.AddrFrom4([4]byte(e.Key))
		st.Elems[priv] = Element{Private: priv, Public: netip.AddrFrom4([4]byte(e.Val[0:4])),
			PortStart: binary.BigEndian.Uint16(e.Val[4:6]), PortEnd: binary.BigEndian.Uint16(e.Val[12:14])}
	}
	st.Exists = true
	return st, nil
}

// Delete removes the table (nothing when there is none).
func (k *K) Delete() error {
	c, err := k.conn()
	if err != nil {
		return err
	}
	if t, _ := c.ListTableOfFamily(Table, nftables.TableFamilyIPv4); t == nil {
		return nil
	}
	c.DelTable(k.table)
	return c.Flush()
}

// Live is a chain's rules as nft prints them (`nft list chain`), one
// string a rule; empty when nft is not installed or there is no table.
func (k *K) Live(chain string) []string {
	args := []string{"list", "chain", "ip", Table, chain}
	var cmd *exec.Cmd
	if k.nsPath == "" {
		cmd = exec.Command("nft", args...)
	} else {
		cmd = exec.Command("nsenter", append([]string{"--net=" + k.nsPath, "nft"}, args...)...)
	}
	out, err := cmd.Output()
	if err != nil {
		return []string{}
	}
	lines := []string{}
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "table ") || strings.HasPrefix(l, "chain ") || l == "}" || strings.HasPrefix(l, "type ") {
			continue
		}
		// nft (1.0.6) cannot print the map's translation: it reads the
		// data range from set user data that google/nftables does not
		// write, and prints the rule without its statement. The rule in
		// the kernel is whole (see SNATMap); put the statement back.
		if strings.Contains(l, `comment "cgnat `) && !strings.Contains(l, `comment "cgnat exempt`) && !strings.Contains(l, "snat") {
			i := strings.Index(l, ` comment "cgnat `)
			l = l[:i] + " snat ip to ip saddr map @" + MapSubs + l[i:]
		}
		lines = append(lines, l)
	}
	return lines
}

// Expressions for the rules.

// OifName matches the output interface.
func OifName(name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
	}
}

func ifname(n string) []byte {
	b := make([]byte, 16)
	copy(b, n)
	return b
}

// L4 matches the transport protocol.
func L4(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// Saddr matches the source address against a network.
func Saddr(p netip.Prefix) []expr.Any { return addrMatch(12, p) }

// Daddr matches the destination address against a network.
func Daddr(p netip.Prefix) []expr.Any { return addrMatch(16, p) }

func addrMatch(off uint32, p netip.Prefix) []expr.Any {
	p = p.Masked()
	a := p.Addr().As4()
	out := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4}}
	if p.Bits() < 32 {
		mask := binary.BigEndian.AppendUint32(nil, ^uint32(0)<<(32-p.Bits()))
		if p.Bits() == 0 {
			mask = []byte{0, 0, 0, 0}
		}
		out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}})
	}
	return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]})
}

// DaddrLocal matches a destination that is an address of this host.
func DaddrLocal() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
}

// Dport matches the transport destination port.
func Dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// ExemptLookup matches a source address in the exempt set.
func (k *K) ExemptLookup() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: SetExempt},
	}
}

// SNATMap translates the source through the subscriber map: address and
// port range (for ICMP the query id) of the element of the source address.
func (k *K) SNATMap() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: MapSubs},
		// reg 1 (32-bit registers 8-11): addr min . port min . addr max . port max
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 10, RegProtoMin: 9, RegProtoMax: 11, Specified: true},
	}
}

// SNATMapAddr translates only the source address through the subscriber
// map (protocols without ports: GRE, ESP...).
func (k *K) SNATMapAddr() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: MapSubs},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 10},
	}
}

// SNATRange translates the source to an address range.
func SNATRange(first, last netip.Addr) []expr.Any {
	a, b := first.As4(), last.As4()
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a[:]},
		&expr.Immediate{Register: 2, Data: b[:]},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 2},
	}
}

// DNAT translates the destination to addr:port.
func DNAT(addr netip.Addr, port uint16) []expr.Any {
	a := addr.As4()
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a[:]},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// CtDNAT matches a connection whose destination was translated.
func CtDNAT() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(0x20), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// Accept ends the chain for the packet with accept.
func Accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }

// Join concatenates expression lists.
func Join(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
