package shaper

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// The shaper's nftables table (inet routerd_shaper): in the forward path,
// the download maps set the packet's priority to the subscriber's class,
// and the upload maps name the subscriber's limit object, which drops what
// it sends over its plan's up rate. IPv6 addresses and delegated prefixes
// are looked up by length: for each prefix length L in use, a hash map
// keyed by the prefix (the packet's address masked to L bits):
//
//	table inet routerd_shaper {
//		limit up-10.0.0.2 { rate over 1250000 bytes/second }   # one per subscriber
//		map down4 { type ipv4_addr : classid }
//		map up4 { type ipv4_addr : limit }
//		set cnt4 { type ipv4_addr; counter }
//		map down6_56 { type ipv6_addr : classid }               # per length in use
//		map up6_56 { type ipv6_addr : limit }
//		set cnt6_56 { type ipv6_addr; counter }
//		chain forward {
//			type filter hook forward priority mangle
//			meta nfproto ipv4 meta priority set ip daddr map @down4
//			meta nfproto ipv4 limit name ip saddr map @up4 drop
//			meta nfproto ipv4 ip saddr @cnt4
//			meta nfproto ipv6 meta priority set ip6 daddr & ffff:ffff:ffff:ff00:: map @down6_56
//			meta nfproto ipv6 limit name ip6 saddr & ffff:ffff:ffff:ff00:: map @up6_56 drop
//			meta nfproto ipv6 ip6 saddr & ffff:ffff:ffff:ff00:: @cnt6_56
//		}
//	}
//
// A subscriber is one element of each map and set it has an address in
// and one limit object, which its IPv4 and IPv6 upload elements share: one
// upload bucket for both families. The cnt sets count what each address
// sent within its rate (after the limit rule's drop), a counter per
// element (the set's counter expression, cloned into each element by the
// kernel): counters.page reads them, the IPv4 and IPv6 elements summed.
// An address's count element is not touched by a rate change, so its
// count goes on. Why hash maps per length rather than one
// interval map: on this kernel every transaction touching an interval map
// costs in proportion to its elements (measured: 27 ms for one element's
// change at 100,000 prefixes, against well under a millisecond for a hash
// map), and a subscriber's every change is a transaction. Prefixes of
// different subscribers must not overlap (Set refuses it), so at most one
// length's rule matches a packet.
type nft struct {
	conn  *nftables.Conn // reads down4
	sock  *nfSock        // every write, and the other reads
	table *nftables.Table
	down4 *nftables.Set
}

const (
	tableName = kernel.ShaperTable
	chainName = "forward"
	mapDown4  = "down4"
	mapUp4    = "up4"
	setCnt4   = "cnt4"
)

// down6Map and up6Map are the IPv6 maps of prefix length bits.
func down6Map(bits int) string { return "down6_" + strconv.Itoa(bits) }
func up6Map(bits int) string   { return "up6_" + strconv.Itoa(bits) }
func cnt6Set(bits int) string  { return "cnt6_" + strconv.Itoa(bits) }

// map6Bits is the prefix length an IPv6 map's name carries (ok false for
// another name).
func map6Bits(name string) (int, bool) {
	for _, p := range []string{"down6_", "up6_", "cnt6_"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			b, err := strconv.Atoi(rest)
			return b, err == nil && b >= 0 && b <= 128
		}
	}
	return 0, false
}

func newNft(c *nftables.Conn, sock *nfSock) *nft {
	t := &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet}
	return &nft{conn: c, sock: sock, table: t,
		down4: &nftables.Set{Table: t, Name: mapDown4, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeClassID},
	}
}

// ensure makes the table, its IPv4 maps, the IPv6 maps of the lengths in
// use and the chain where missing, puts the chain's rules back exactly and
// removes every other map of the table (those of lengths no longer in use,
// the interval maps of earlier versions: flushed first, so the limit
// objects their elements name are free), in one transaction. A table whose
// maps the kernel finds incompatible (another layout) is started again.
func (n *nft) ensure(lens []int) error {
	var stale []string
	if names, err := n.sock.sets(); err == nil {
		keep := map[string]bool{mapDown4: true, mapUp4: true, setCnt4: true}
		for _, l := range lens {
			keep[down6Map(l)], keep[up6Map(l)], keep[cnt6Set(l)] = true, true, true
		}
		for _, name := range names {
			if !keep[name] {
				stale = append(stale, name)
			}
		}
	}
	t, err := n.layout(lens, stale, false)
	if err != nil {
		return err
	}
	if err := n.sock.commit(t); err == nil {
		return nil
	}
	if t, err = n.layout(lens, nil, true); err != nil {
		return err
	}
	if err := n.sock.commit(t); err != nil {
		return fmt.Errorf("nftables: building %s: %w", tableName, err)
	}
	return nil
}

func (n *nft) layout(lens []int, stale []string, fresh bool) (*nfTxn, error) {
	t := &nfTxn{}
	if fresh {
		t.add(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, attr(unix.NFTA_TABLE_NAME, str(tableName)))
		t.add(unix.NFT_MSG_DELTABLE, 0, attr(unix.NFTA_TABLE_NAME, str(tableName)))
	}
	t.add(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, attr(unix.NFTA_TABLE_NAME, str(tableName)))
	t.classMap(mapDown4, 7, 4)
	t.addObjMap(mapUp4, 7, 4)
	t.countSet(setCnt4, 7, 4)
	for _, l := range lens {
		t.maps6(l)
	}
	hook := nested(unix.NFTA_CHAIN_HOOK)
	hook.AddRtAttr(unix.NFTA_HOOK_HOOKNUM, be32(unix.NF_INET_FORWARD))
	hook.AddRtAttr(unix.NFTA_HOOK_PRIORITY, be32(uint32(int32(*nftables.ChainPriorityMangle))))
	t.add(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE,
		attr(unix.NFTA_CHAIN_TABLE, str(tableName)), attr(unix.NFTA_CHAIN_NAME, str(chainName)),
		hook, attr(unix.NFTA_CHAIN_TYPE, str("filter")))
	if err := t.rules(lens); err != nil {
		return nil, err
	}
	for _, name := range stale {
		t.flushSet(name)
		t.add(unix.NFT_MSG_DELSET, 0, attr(unix.NFTA_SET_TABLE, str(tableName)), attr(unix.NFTA_SET_NAME, str(name)))
	}
	return t, nil
}

// classMap creates a map from addresses (keyLen bytes of keyType) to
// class ids.
func (t *nfTxn) classMap(name string, keyType, keyLen uint32) {
	t.add(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE,
		attr(unix.NFTA_SET_TABLE, str(tableName)), attr(unix.NFTA_SET_NAME, str(name)),
		attr(unix.NFTA_SET_FLAGS, be32(unix.NFT_SET_MAP)), attr(unix.NFTA_SET_KEY_TYPE, be32(keyType)),
		attr(unix.NFTA_SET_KEY_LEN, be32(keyLen)), attr(unix.NFTA_SET_DATA_TYPE, be32(23)), // classid
		attr(unix.NFTA_SET_DATA_LEN, be32(4)), attr(unix.NFTA_SET_ID, be32(uint32(len(t.msgs)+1))),
		// Class ids are host-endian: said so, nft(8) prints them as tc does.
		attr(unix.NFTA_SET_USERDATA, userdata.AppendUint32(nil, userdata.NFTNL_UDATA_SET_DATABYTEORDER, 1)))
}

// maps6 creates the two IPv6 maps and the count set of prefix length
// bits.
func (t *nfTxn) maps6(bits int) {
	t.classMap(down6Map(bits), 8, 16)
	t.addObjMap(up6Map(bits), 8, 16)
	t.countSet(cnt6Set(bits), 8, 16)
}

// countSet creates a set of addresses (keyLen bytes of keyType) whose
// every element has a counter of its own: the set's counter expression,
// which the kernel clones into each element added, and which a lookup
// that finds the element counts the packet in.
func (t *nfTxn) countSet(name string, keyType, keyLen uint32) {
	e := nested(nftaSetExpr)
	e.AddRtAttr(unix.NFTA_EXPR_NAME, str("counter"))
	e.AddChild(nested(unix.NFTA_EXPR_DATA))
	t.add(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE,
		attr(unix.NFTA_SET_TABLE, str(tableName)), attr(unix.NFTA_SET_NAME, str(name)),
		attr(unix.NFTA_SET_FLAGS, be32(0)), attr(unix.NFTA_SET_KEY_TYPE, be32(keyType)),
		attr(unix.NFTA_SET_KEY_LEN, be32(keyLen)), attr(unix.NFTA_SET_ID, be32(uint32(len(t.msgs)+1))), e)
}

func (t *nfTxn) flushSet(name string) {
	t.add(unix.NFT_MSG_DELSETELEM, 0, attr(unix.NFTA_SET_ELEM_LIST_TABLE, str(tableName)), attr(unix.NFTA_SET_ELEM_LIST_SET, str(name)))
}

// rules empties the chain and puts the shaper's rules in: the IPv4
// download, upload and count rules, then the same per IPv6 prefix length,
// longest first.
func (t *nfTxn) rules(lens []int) error {
	t.add(unix.NFT_MSG_DELRULE, 0, attr(unix.NFTA_RULE_TABLE, str(tableName)), attr(unix.NFTA_RULE_CHAIN, str(chainName)))
	family := func(proto byte) []expr.Any {
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		}
	}
	addr := func(off, size uint32) expr.Any {
		return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size}
	}
	lookup := func(set string) expr.Any {
		return &expr.Lookup{SourceRegister: 1, SetName: set, DestRegister: 1, IsDestRegSet: true}
	}
	count := func(set string) expr.Any { return &expr.Lookup{SourceRegister: 1, SetName: set} }
	setPriority := &expr.Meta{Key: expr.MetaKeyPRIORITY, SourceRegister: true, Register: 1}
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	type rule struct {
		exprs  []expr.Any
		objMap string
		verd   expr.Any
	}
	rs := []rule{
		{append(family(unix.NFPROTO_IPV4), addr(16, 4), lookup(mapDown4), setPriority), "", nil},
		{append(family(unix.NFPROTO_IPV4), addr(12, 4)), mapUp4, drop},
		{append(family(unix.NFPROTO_IPV4), addr(12, 4), count(setCnt4)), "", nil},
	}
	sorted := slices.Clone(lens)
	slices.SortFunc(sorted, func(a, b int) int { return b - a })
	for _, l := range sorted {
		masked := func(off uint32) []expr.Any {
			ex := append(family(unix.NFPROTO_IPV6), addr(off, 16))
			if l < 128 {
				m := netip.PrefixFrom(netip.IPv6Unspecified(), l)
				ex = append(ex, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 16, Mask: mask6(m.Bits()), Xor: make([]byte, 16)})
			}
			return ex
		}
		rs = append(rs,
			rule{append(masked(24), lookup(down6Map(l)), setPriority), "", nil},
			rule{masked(8), up6Map(l), drop},
			rule{append(masked(8), count(cnt6Set(l))), "", nil})
	}
	for _, r := range rs {
		if err := t.addRule(chainName, r.exprs, r.objMap, r.verd); err != nil {
			return err
		}
	}
	return nil
}

// mask6 is the netmask of an IPv6 prefix length.
func mask6(bits int) []byte {
	m := make([]byte, 16)
	for i := 0; i < bits; i++ {
		m[i/8] |= 1 << (7 - uint(i%8))
	}
	return m
}

func classBytes(classid uint32) []byte { return binaryutil.NativeEndian.PutUint32(classid) }

func elems4(ip netip.Addr, classid uint32) []elem {
	b := ip.As4()
	return []elem{{key: b[:], val: classBytes(classid)}}
}

func upElems4(ip netip.Addr, obj string) []elem {
	b := ip.As4()
	return []elem{{key: b[:], obj: obj}}
}

// elems6 is an IPv6 prefix's download element (in the map of its
// length): the prefix's masked address.
func elems6(p netip.Prefix, classid uint32) []elem {
	k := p.Masked().Addr().As16()
	return []elem{{key: k[:], val: classBytes(classid), bits: p.Bits()}}
}

// cntElems4 and cntElems6 are an address's and a prefix's count elements.
func cntElems4(ip netip.Addr) []elem {
	b := ip.As4()
	return []elem{{key: b[:]}}
}

func cntElems6(p netip.Prefix) []elem {
	k := p.Masked().Addr().As16()
	return []elem{{key: k[:], bits: p.Bits()}}
}

// upElems6 is the same naming the subscriber's limit object.
func upElems6(p netip.Prefix, obj string) []elem {
	k := p.Masked().Addr().As16()
	return []elem{{key: k[:], obj: obj, bits: p.Bits()}}
}

// nftChange is one transaction's changes to the shaper's table; commit
// applies them in an order the kernel accepts: element removals, then the
// objects no element names any longer, then new objects, then new
// elements.
type nftChange struct {
	del4, del6, delUp4, delUp6 []elem
	delCnt4, delCnt6           []elem
	delObj                     []string
	addObj                     []limit
	add4, add6, addUp4, addUp6 []elem
	addCnt4, addCnt6           []elem
	// When the IPv6 prefix lengths in use change: the maps of the new
	// lengths made first, the chain's rules for lens put in after the
	// elements, the maps of dropped lengths (emptied by then) deleted.
	newLens, dropLens, lens []int
}

func (c *nftChange) txn() (*nfTxn, error) {
	t := &nfTxn{}
	for _, l := range c.newLens {
		t.maps6(l)
	}
	t.elems(mapDown4, c.del4, true)
	t.elems6(down6Map, c.del6, true)
	t.elems(mapUp4, c.delUp4, true)
	t.elems6(up6Map, c.delUp6, true)
	t.elems(setCnt4, c.delCnt4, true)
	t.elems6(cnt6Set, c.delCnt6, true)
	for _, o := range c.delObj {
		t.delLimit(o)
	}
	for _, l := range c.addObj {
		t.addLimit(l)
	}
	t.elems(mapDown4, c.add4, false)
	t.elems6(down6Map, c.add6, false)
	t.elems(mapUp4, c.addUp4, false)
	t.elems6(up6Map, c.addUp6, false)
	t.elems(setCnt4, c.addCnt4, false)
	t.elems6(cnt6Set, c.addCnt6, false)
	if len(c.newLens)+len(c.dropLens) > 0 {
		if err := t.rules(c.lens); err != nil {
			return nil, err
		}
		for _, l := range c.dropLens {
			for _, name := range []string{down6Map(l), up6Map(l), cnt6Set(l)} {
				t.add(unix.NFT_MSG_DELSET, 0, attr(unix.NFTA_SET_TABLE, str(tableName)), attr(unix.NFTA_SET_NAME, str(name)))
			}
		}
	}
	return t, nil
}

// elems6 adds or removes IPv6 elements, each in the map of its length.
func (t *nfTxn) elems6(mapOf func(int) string, els []elem, del bool) {
	byLen := map[int][]elem{}
	for _, e := range els {
		byLen[e.bits] = append(byLen[e.bits], e)
	}
	for _, l := range sortedInts(byLen) {
		t.elems(mapOf(l), byLen[l], del)
	}
}

func sortedInts[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// apply commits c as one transaction.
func (n *nft) apply(c *nftChange) error {
	t, err := c.txn()
	if err != nil {
		return err
	}
	if err := n.sock.commit(t); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	return nil
}

// upName is the name of the limit object of the subscriber at ip.
func upName(ip netip.Addr) string { return "up-" + ip.String() }

// upLimit is a subscriber's upload policer at up Mbit/s. The kernel's
// bucket holds one unit (a second) at the rate plus the burst (nft_limit:
// tokens_max = unit * (rate + burst) / rate), already more than a TCP flow
// needs to reach the rate at any round-trip time a subscriber sees; the
// burst adds nothing to it.
func upLimit(ip netip.Addr, up int64) limit {
	return limit{name: upName(ip), rate: uint64(up) * 1_000_000 / 8}
}
