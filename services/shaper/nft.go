package shaper

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// The shaper's nftables table (inet routerd_shaper): in the forward path,
// the download maps set the packet's priority to the subscriber's class,
// and the upload maps name the subscriber's limit object, which drops what
// it sends over its plan's up rate:
//
//	table inet routerd_shaper {
//		limit up-10.0.0.2 { rate over 1250000 bytes/second }   # one per subscriber
//		map down4 { type ipv4_addr : classid }
//		map down6 { type ipv6_addr : classid; flags interval }
//		map up4 { type ipv4_addr : limit }
//		map up6 { type ipv6_addr : limit; flags interval }
//		chain forward {
//			type filter hook forward priority mangle
//			meta nfproto ipv4 meta priority set ip daddr map @down4
//			meta nfproto ipv6 meta priority set ip6 daddr map @down6
//			meta nfproto ipv4 limit name ip saddr map @up4 drop
//			meta nfproto ipv6 limit name ip6 saddr map @up6 drop
//		}
//	}
//
// A subscriber is one element of each map it has an address in (an IPv6
// address or delegated prefix is an interval) and one limit object, which
// its IPv4 and IPv6 upload elements share: one upload bucket for both
// families. (Looking the IPv6 source up as the subscriber's IPv4 address
// first, so that a change of rates would not touch the interval maps, is
// expressible in netlink, but nft(8) 1.0.6 aborts listing such a rule.)
type nft struct {
	conn  *nftables.Conn // reads the download maps
	sock  *nfSock        // every write, and the upload maps' and objects' reads
	table *nftables.Table
	down4 *nftables.Set
	down6 *nftables.Set
}

const (
	tableName = kernel.ShaperTable
	chainName = "forward"
	mapDown4  = "down4"
	mapDown6  = "down6"
	mapUp4    = "up4"
	mapUp6    = "up6"
)

func newNft(c *nftables.Conn, sock *nfSock) *nft {
	t := &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet}
	return &nft{conn: c, sock: sock, table: t,
		down4: &nftables.Set{Table: t, Name: mapDown4, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeClassID},
		down6: &nftables.Set{Table: t, Name: mapDown6, IsMap: true, Interval: true, KeyType: nftables.TypeIP6Addr, DataType: nftables.TypeClassID},
	}
}

// ensure makes the table, its maps and chain where missing and puts the
// chain's four rules back exactly, in one transaction. A table whose maps
// the kernel finds incompatible (another layout) is started again.
func (n *nft) ensure() error {
	t, err := n.layout(false)
	if err != nil {
		return err
	}
	if err := n.sock.commit(t); err == nil {
		return nil
	}
	if t, err = n.layout(true); err != nil {
		return err
	}
	if err := n.sock.commit(t); err != nil {
		return fmt.Errorf("nftables: building %s: %w", tableName, err)
	}
	return nil
}

func (n *nft) layout(fresh bool) (*nfTxn, error) {
	t := &nfTxn{}
	if fresh {
		t.add(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, attr(unix.NFTA_TABLE_NAME, str(tableName)))
		t.add(unix.NFT_MSG_DELTABLE, 0, attr(unix.NFTA_TABLE_NAME, str(tableName)))
	}
	t.add(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, attr(unix.NFTA_TABLE_NAME, str(tableName)))
	// Interval keys are big-endian; the user data says so to nft(8).
	bigEndian := userdata.AppendUint32(nil, userdata.NFTNL_UDATA_SET_KEYBYTEORDER, 2)
	for _, m := range []struct {
		name       string
		key, klen  uint32
		data, dlen uint32
		interval   bool
	}{{mapDown4, 7, 4, 23, 4, false}, {mapDown6, 8, 16, 23, 4, true}} {
		flags := uint32(unix.NFT_SET_MAP)
		if m.interval {
			flags |= unix.NFT_SET_INTERVAL
		}
		data := []nl.NetlinkRequestData{attr(unix.NFTA_SET_TABLE, str(tableName)), attr(unix.NFTA_SET_NAME, str(m.name)),
			attr(unix.NFTA_SET_FLAGS, be32(flags)), attr(unix.NFTA_SET_KEY_TYPE, be32(m.key)),
			attr(unix.NFTA_SET_KEY_LEN, be32(m.klen)), attr(unix.NFTA_SET_DATA_TYPE, be32(m.data)),
			attr(unix.NFTA_SET_DATA_LEN, be32(m.dlen)), attr(unix.NFTA_SET_ID, be32(uint32(len(t.msgs)+1)))}
		if m.interval {
			data = append(data, attr(unix.NFTA_SET_USERDATA, bigEndian))
		}
		t.add(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, data...)
	}
	t.addObjMap(mapUp4, 7, 4, false)
	t.addObjMap(mapUp6, 8, 16, true)
	hook := nested(unix.NFTA_CHAIN_HOOK)
	hook.AddRtAttr(unix.NFTA_HOOK_HOOKNUM, be32(unix.NF_INET_FORWARD))
	hook.AddRtAttr(unix.NFTA_HOOK_PRIORITY, be32(uint32(int32(*nftables.ChainPriorityMangle))))
	t.add(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE,
		attr(unix.NFTA_CHAIN_TABLE, str(tableName)), attr(unix.NFTA_CHAIN_NAME, str(chainName)),
		hook, attr(unix.NFTA_CHAIN_TYPE, str("filter")))
	// Every rule of the chain out, then the shaper's four.
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
	setPriority := &expr.Meta{Key: expr.MetaKeyPRIORITY, SourceRegister: true, Register: 1}
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	rules := []struct {
		exprs  []expr.Any
		objMap string
		verd   expr.Any
	}{
		{append(family(unix.NFPROTO_IPV4), addr(16, 4), lookup(mapDown4), setPriority), "", nil},
		{append(family(unix.NFPROTO_IPV6), addr(24, 16), lookup(mapDown6), setPriority), "", nil},
		{append(family(unix.NFPROTO_IPV4), addr(12, 4)), mapUp4, drop},
		{append(family(unix.NFPROTO_IPV6), addr(8, 16)), mapUp6, drop},
	}
	for _, r := range rules {
		if err := t.addRule(chainName, r.exprs, r.objMap, r.verd); err != nil {
			return nil, err
		}
	}
	return t, nil
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

// interval6 is [prefix start, next after its end) of an IPv6 prefix: the
// end is invalid when the prefix ends at the top of the space.
func interval6(p netip.Prefix) (start, end [16]byte, hasEnd bool) {
	start = p.Masked().Addr().As16()
	end = start
	// Set every host bit, then add one.
	for i := p.Bits(); i < 128; i++ {
		end[i/8] |= 1 << (7 - uint(i%8))
	}
	hi := binary.BigEndian.Uint64(end[:8])
	lo := binary.BigEndian.Uint64(end[8:])
	lo++
	if lo == 0 {
		hi++
	}
	binary.BigEndian.PutUint64(end[:8], hi)
	binary.BigEndian.PutUint64(end[8:], lo)
	return start, end, hi != 0 || lo != 0
}

// elems6 is an IPv6 prefix's download interval: two elements, the second
// marking the end.
func elems6(p netip.Prefix, classid uint32) []elem {
	return interval(p, elem{val: classBytes(classid)})
}

// upElems6 is the same interval naming the subscriber's limit object.
func upElems6(p netip.Prefix, obj string) []elem {
	return interval(p, elem{obj: obj})
}

func interval(p netip.Prefix, first elem) []elem {
	start, end, hasEnd := interval6(p)
	first.key = start[:]
	out := []elem{first}
	if hasEnd {
		out = append(out, elem{key: end[:], end: true})
	}
	return out
}

// nftChange is one transaction's changes to the shaper's table; commit
// applies them in an order the kernel accepts: element removals, then the
// objects no element names any longer, then new objects, then new
// elements.
type nftChange struct {
	del4, del6, delUp4, delUp6 []elem
	delObj                     []string
	addObj                     []limit
	add4, add6, addUp4, addUp6 []elem
}

func (c *nftChange) txn() *nfTxn {
	t := &nfTxn{}
	t.elems(mapDown4, c.del4, true)
	t.elems(mapDown6, c.del6, true)
	t.elems(mapUp4, c.delUp4, true)
	t.elems(mapUp6, c.delUp6, true)
	for _, o := range c.delObj {
		t.delLimit(o)
	}
	for _, l := range c.addObj {
		t.addLimit(l)
	}
	t.elems(mapDown4, c.add4, false)
	t.elems(mapDown6, c.add6, false)
	t.elems(mapUp4, c.addUp4, false)
	t.elems(mapUp6, c.addUp6, false)
	return t
}

// apply commits c as one transaction.
func (n *nft) apply(c *nftChange) error {
	if err := n.sock.commit(c.txn()); err != nil {
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
