package shaper

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// The shaper's nftables table (inet routerd_shaper): two maps from a
// subscriber's address to its download class, and one chain in the forward
// path setting the packet's priority from them:
//
//	table inet routerd_shaper {
//		map down4 { type ipv4_addr : classid }
//		map down6 { type ipv6_addr : classid; flags interval }
//		chain forward {
//			type filter hook forward priority mangle
//			meta nfproto ipv4 meta priority set ip daddr map @down4
//			meta nfproto ipv6 meta priority set ip6 daddr map @down6
//		}
//	}
//
// One subscriber is one element of each map it has an address in.
type nft struct {
	conn  *nftables.Conn
	table *nftables.Table
	down4 *nftables.Set
	down6 *nftables.Set
}

func newNft(c *nftables.Conn) *nft {
	t := &nftables.Table{Name: kernel.ShaperTable, Family: nftables.TableFamilyINet}
	return &nft{conn: c, table: t,
		down4: &nftables.Set{Table: t, Name: "down4", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeClassID},
		down6: &nftables.Set{Table: t, Name: "down6", IsMap: true, Interval: true, KeyType: nftables.TypeIP6Addr, DataType: nftables.TypeClassID},
	}
}

// ensure makes the table, maps and chain when missing, and puts the
// chain's two rules back when they are not exactly the shaper's.
func (n *nft) ensure() error {
	tabs, err := n.conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("nftables: listing tables: %w", err)
	}
	exists := false
	for _, t := range tabs {
		if t.Name == kernel.ShaperTable {
			exists = true
		}
	}
	if exists {
		sets, err := n.conn.GetSets(n.table)
		if err != nil {
			return fmt.Errorf("nftables: listing maps: %w", err)
		}
		ok := 0
		for _, s := range sets {
			if (s.Name == "down4" && s.KeyType.Name == "ipv4_addr" && s.IsMap) || (s.Name == "down6" && s.Interval && s.IsMap) {
				ok++
			}
		}
		if ok != 2 {
			// Not the shaper's current layout: start the table again.
			n.conn.DelTable(n.table)
			exists = false
		}
	}
	if !exists {
		n.conn.AddTable(n.table)
		if err := n.conn.AddSet(n.down4, nil); err != nil {
			return err
		}
		if err := n.conn.AddSet(n.down6, nil); err != nil {
			return err
		}
	}
	prio := nftables.ChainPriorityMangle
	ch := n.conn.AddChain(&nftables.Chain{Name: "forward", Table: n.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: prio})
	n.conn.FlushChain(ch)
	for _, r := range []struct {
		proto byte
		off   uint32
		size  uint32
		set   *nftables.Set
	}{{unix.NFPROTO_IPV4, 16, 4, n.down4}, {unix.NFPROTO_IPV6, 24, 16, n.down6}} {
		n.conn.AddRule(&nftables.Rule{Table: n.table, Chain: ch, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{r.proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: r.off, Len: r.size},
			&expr.Lookup{SourceRegister: 1, SetName: r.set.Name, SetID: r.set.ID, DestRegister: 1, IsDestRegSet: true},
			&expr.Meta{Key: expr.MetaKeyPRIORITY, SourceRegister: true, Register: 1},
		}})
	}
	if err := n.conn.Flush(); err != nil {
		return fmt.Errorf("nftables: building %s: %w", kernel.ShaperTable, err)
	}
	return nil
}

func classBytes(classid uint32) []byte { return binaryutil.NativeEndian.PutUint32(classid) }

func elems4(ip netip.Addr, classid uint32) []nftables.SetElement {
	b := ip.As4()
	return []nftables.SetElement{{Key: b[:], Val: classBytes(classid)}}
}

// elems6 is the interval [prefix start, next after its end) of an IPv6
// prefix: two elements, the second marking the end.
func elems6(p netip.Prefix, classid uint32) []nftables.SetElement {
	start := p.Masked().Addr().As16()
	end := start
	// Set every host bit, then add one.
	bits := p.Bits()
	for i := bits; i < 128; i++ {
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
	out := []nftables.SetElement{{Key: start[:], Val: classBytes(classid)}}
	if hi == 0 && lo == 0 { // the prefix ends at the top of the space
		return out
	}
	return append(out, nftables.SetElement{Key: end[:], IntervalEnd: true})
}

// msgElems bounds the elements of one netlink message: a message's
// element list is one attribute, whose length the kernel reads as 16 bits.
const msgElems = 512

func (n *nft) addElems(set *nftables.Set, els []nftables.SetElement, del bool) error {
	for len(els) > 0 {
		m := min(msgElems, len(els))
		var err error
		if del {
			err = n.conn.SetDeleteElements(set, els[:m])
		} else {
			err = n.conn.SetAddElements(set, els[:m])
		}
		if err != nil {
			return err
		}
		els = els[m:]
	}
	return nil
}

// change applies element removals then additions in one transaction.
func (n *nft) change(del4, add4, del6, add6 []nftables.SetElement) error {
	for _, x := range []struct {
		set *nftables.Set
		els []nftables.SetElement
		del bool
	}{{n.down4, del4, true}, {n.down6, del6, true}, {n.down4, add4, false}, {n.down6, add6, false}} {
		if err := n.addElems(x.set, x.els, x.del); err != nil {
			return err
		}
	}
	if err := n.conn.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	return nil
}
