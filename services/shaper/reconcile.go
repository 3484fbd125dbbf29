package shaper

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
	"routerd.dev/shared/store"
)

// ReconcileResult says what a reconcile changed in the kernel.
type ReconcileResult struct {
	Subscribers int
	// Added, Changed and Removed count kernel objects (classes, upload
	// nodes, map elements, links).
	Added, Changed, Removed int
	Problems                []string
}

// Reconcile brings the kernel to the store both ways: what the shaper
// owns (its tables' elements, classes and nodes under its roots, its ifb
// links and roots) that is not stored is removed, what is stored and
// missing or different is added or changed. With nothing in the kernel it
// is the full build. A second run changes nothing.
func (s *Service) Reconcile(ctx context.Context) (*ReconcileResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return nil, fmt.Errorf("not holding the lock")
	}
	items, err := store.List[record](ctx, s.w, s.st.Key("shapes")+"/")
	if err != nil {
		return nil, err
	}
	if err := s.nft.ensure(); err != nil {
		return nil, err
	}
	res := &ReconcileResult{}
	st := newState()
	s.state = st
	prefix := s.st.Key("shapes") + "/"
	var rewrite []*record
	stored := map[string]bool{} // interfaces with stored subscribers, shaped or not
	for _, it := range items {
		r := it.Value
		stored[r.Iface] = true
		r.ID = idFromKey(prefix, it.Key)
		p, err := parseShape(&r.Shape)
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: %v", r.ID, err))
			continue
		}
		if other, ok := st.byIP[p.ip]; ok {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: ip %s is also %s's", r.ID, p.ip, other))
			continue
		}
		is, err := s.iface(r.Iface)
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: %v", r.ID, err))
			continue
		}
		// The stored class, when it agrees with the address and the
		// groups seen so far; a new one otherwise (stored again below).
		g := is.groups[net24(p.ip)]
		major := uint16(r.Class >> 16)
		if g == nil && major > 0 && major < maxGroup && is.byMajor[major] == nil && r.Node > 0 {
			g = &group{g: major, node: r.Node, net24: net24(p.ip)}
			is.addGroup(g)
		}
		if g == nil || r.Class != classOf(g, p.ip) || r.Node != g.node {
			if g == nil {
				if g, _, err = is.groupFor(p.ip); err != nil {
					res.Problems = append(res.Problems, fmt.Sprintf("%s: %v", r.ID, err))
					continue
				}
				is.addGroup(g)
			}
			r.Class, r.Node = classOf(g, p.ip), g.node
			rewrite = append(rewrite, &r)
		}
		rec := r
		g.members++
		is.count++
		st.recs[r.ID] = &rec
		st.byIP[p.ip] = r.ID
		if p.p6.IsValid() {
			if other, ok := st.by6[p.p6]; ok {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: prefix6 %s is also %s's (not shaped for it)", r.ID, p.p6, other))
				rec.Prefix6 = ""
			} else {
				st.by6[p.p6] = r.ID
			}
		}
	}
	res.Subscribers = len(st.recs)
	if len(rewrite) > 0 {
		if err := s.putRecords(ctx, rewrite, nil); err != nil {
			return nil, err
		}
	}
	for _, name := range sortedKeys(st.ifaces) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.reconcileIface(st.ifaces[name], res); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("interface %s: %v", name, err))
		}
	}
	if err := s.reconcileNft(res); err != nil {
		return nil, err
	}
	s.dropStray(res, stored)
	return res, nil
}

// reconcileIface brings one interface's classes and upload nodes to the
// state: one dump of each kind, then only the differences.
func (s *Service) reconcileIface(is *ifaceS, res *ReconcileResult) error {
	ik := is.k
	want := map[uint32]*record{}
	for _, r := range s.state.recs {
		if r.Iface == ik.name {
			want[r.Class] = r
		}
	}
	type side struct {
		ix   int
		rate func(*record) int64
	}
	sides := []side{{ik.index, func(r *record) int64 { return r.DownMbps }}, {ik.ifbIx, func(r *record) int64 { return r.UpMbps }}}
	missingGroup := map[uint16]bool{}
	for g := range is.byMajor {
		missingGroup[g] = false
	}
	type have struct {
		rate    map[uint32]uint64
		groups  map[uint16]bool
		hasLeaf map[uint32]bool
	}
	haves := make([]have, 2)
	for i, sd := range sides {
		link := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: sd.ix}}
		cls, err := s.k.nl.ClassList(link, 0)
		if err != nil {
			return fmt.Errorf("listing classes: %w", err)
		}
		h := have{rate: map[uint32]uint64{}, groups: map[uint16]bool{}, hasLeaf: map[uint32]bool{}}
		for _, c := range cls {
			hc, ok := c.(*netlink.HtbClass)
			if !ok {
				continue
			}
			a := hc.Attrs()
			if a.Handle>>16 == major {
				h.groups[uint16(a.Handle)] = true
			} else {
				h.rate[a.Handle] = hc.Rate
			}
		}
		if s.k.leaf != "pfifo" {
			if qs, err := s.k.nl.QdiscList(link); err == nil {
				for _, q := range qs {
					if q.Type() == "fq_codel" && q.Attrs().LinkIndex == sd.ix {
						h.hasLeaf[q.Attrs().Parent] = true
					}
				}
			}
		}
		haves[i] = h
		for g := range is.byMajor {
			if !h.groups[g] {
				missingGroup[g] = true
			}
		}
	}
	// Removals first, children before parents: the ifb's stale nodes,
	// then classes, then groups.
	rootNodes, err := s.k.nodes(ik.ifbIx, rootHandle(), tableGroup)
	if err != nil {
		return err
	}
	for g := range haves[1].groups {
		if is.byMajor[g] != nil {
			continue
		}
		// A group not stored: the nested nodes and classes go with it.
		for _, n := range rootNodes {
			if n.classid == groupClass(g) {
				if err := s.k.delNode(ik.ifbIx, rootHandle(), n.handle); err == nil {
					res.Removed++
				}
			}
		}
	}
	for i, sd := range sides {
		for cid := range haves[i].rate {
			if want[cid] == nil && is.byMajor[uint16(cid>>16)] != nil {
				if i == 1 {
					ip := netip.AddrFrom4([4]byte{0, 0, 0, byte(cid&0xffff) - 1})
					_ = s.k.delNode(ik.ifbIx, groupQdisc(uint16(cid>>16)), subNode(ip))
				}
				if err := ignoreMissing(s.k.nl.ClassDel(htbClass(sd.ix, groupQdisc(uint16(cid>>16)), cid, 1_000_000))); err == nil {
					res.Removed++
				}
			}
		}
		for g := range haves[i].groups {
			if is.byMajor[g] == nil {
				if err := ignoreMissing(s.k.nl.ClassDel(htbClass(sd.ix, rootHandle(), groupClass(g), groupRate))); err == nil {
					res.Removed++
				}
			}
		}
	}
	// Groups: built where either side lacks them, or the /24's node is
	// missing or different.
	for _, n := range rootNodes {
		g := is.byMajor[uint16(n.classid)]
		if n.classid>>16 != major || g == nil || groupNode(g.net24, g.node) != n.handle || n.key != v4(g.net24) {
			if err := s.k.delNode(ik.ifbIx, rootHandle(), n.handle); err == nil {
				res.Removed++
			}
			continue
		}
	}
	seenNode := map[uint32]bool{}
	for _, n := range rootNodes {
		seenNode[n.handle] = true
	}
	for gid, g := range is.byMajor {
		if missingGroup[gid] || !seenNode[groupNode(g.net24, g.node)] {
			if err := s.k.putGroup(ik, g.g, g.net24, g.node); err != nil {
				return err
			}
			res.Added++
		}
	}
	// Subscribers: classes on both sides, upload nodes per group.
	for cid, r := range want {
		ip, _ := netip.ParseAddr(r.IP)
		down, up := haves[0].rate[cid], haves[1].rate[cid]
		switch {
		case down == 0 || up == 0:
			if err := s.k.putSub(ik, cid, ip, r.DownMbps, r.UpMbps, true); err != nil {
				return fmt.Errorf("%s: %w", r.ID, err)
			}
			res.Added++
		case down != uint64(r.DownMbps)*1_000_000/8 || up != uint64(r.UpMbps)*1_000_000/8:
			if err := s.k.rates(ik, cid, r.DownMbps, r.UpMbps); err != nil {
				return fmt.Errorf("%s: %w", r.ID, err)
			}
			res.Changed++
		default:
			if s.k.leaf != "pfifo" && (!haves[0].hasLeaf[cid] || !haves[1].hasLeaf[cid]) {
				for _, ix := range []int{ik.index, ik.ifbIx} {
					if err := s.k.putLeaf(ix, cid); err != nil {
						return err
					}
				}
				if s.k.leaf == "fq_codel" {
					res.Changed++
				}
			}
		}
	}
	for gid := range is.byMajor {
		nodes, err := s.k.nodes(ik.ifbIx, groupQdisc(gid), tableSub)
		if err != nil {
			return err
		}
		got := map[uint32]node{}
		for _, n := range nodes {
			got[n.handle] = n
			r := want[n.classid]
			if r == nil || subNode(mustIP(r.IP)) != n.handle || n.key != v4(mustIP(r.IP)) {
				if err := s.k.delNode(ik.ifbIx, groupQdisc(gid), n.handle); err == nil {
					res.Removed++
				}
				delete(got, n.handle)
			}
		}
		for cid, r := range want {
			if uint16(cid>>16) != gid {
				continue
			}
			ip := mustIP(r.IP)
			if _, ok := got[subNode(ip)]; !ok {
				if err := s.k.putNode(ik, cid, ip); err != nil {
					return fmt.Errorf("%s: %w", r.ID, err)
				}
				res.Added++
			}
		}
	}
	return nil
}

func mustIP(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)
	return a
}

// node is one u32 node of a hash table: its handle, class and first key.
type node struct {
	handle, classid, key uint32
}

// nodes lists the terminal nodes of table htid in qdisc parent.
func (k *kern) nodes(ix int, parent, htid uint32) ([]node, error) {
	fs, err := k.nl.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ix}}, parent)
	if err != nil {
		return nil, fmt.Errorf("listing filters: %w", err)
	}
	var out []node
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok || f.Attrs().Priority != 1 || f.Attrs().Handle>>20 != htid || f.Attrs().Handle&0xfff == 0 || u.Link != 0 {
			continue
		}
		n := node{handle: f.Attrs().Handle, classid: u.ClassId}
		if u.Sel != nil && len(u.Sel.Keys) > 0 {
			n.key = u.Sel.Keys[0].Val
		}
		out = append(out, n)
	}
	return out, nil
}

func (k *kern) delNode(ix int, parent, handle uint32) error {
	return ignoreMissing(k.nl.FilterDel(&netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: ix, Parent: parent, Priority: 1, Protocol: unix.ETH_P_IP, Handle: handle}}))
}

func (k *kern) putNode(ik *ifaceK, classid uint32, ip netip.Addr) error {
	g := uint16(classid >> 16)
	h := subNode(ip)
	return k.nl.FilterReplace(&netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ik.ifbIx, Parent: groupQdisc(g), Priority: 1, Protocol: unix.ETH_P_IP, Handle: h},
		Hash:        h &^ 0xfff, ClassId: classid,
		Sel: &nl.TcU32Sel{Flags: nl.TC_U32_TERMINAL, Keys: []nl.TcU32Key{{Mask: 0xffffffff, Val: v4(ip), Off: 12}}},
	})
}

// reconcileNft brings the two maps to the state: down4 element by element,
// down6 (intervals) rebuilt in one transaction when it differs at all.
func (s *Service) reconcileNft(res *ReconcileResult) error {
	n := s.nft
	got, err := n.conn.GetSetElements(n.down4)
	if err != nil {
		return fmt.Errorf("nftables: listing down4: %w", err)
	}
	want := map[netip.Addr]uint32{}
	var want6 []nftables.SetElement
	starts6 := map[[16]byte]uint32{}
	for _, r := range s.state.recs {
		p, _ := parseShape(&r.Shape)
		want[p.ip] = r.Class
		if p.p6.IsValid() {
			want6 = append(want6, elems6(p.p6, r.Class)...)
			starts6[p.p6.Addr().As16()] = r.Class
		}
	}
	var del, add []nftables.SetElement
	seen := map[netip.Addr]bool{}
	for _, e := range got {
		a, ok := netip.AddrFromSlice(e.Key)
		if !ok {
			continue
		}
		c, w := want[a]
		if !w || len(e.Val) != 4 || nativeU32(e.Val) != c {
			del = append(del, nftables.SetElement{Key: e.Key})
			continue
		}
		seen[a] = true
	}
	for a, c := range want {
		if !seen[a] {
			add = append(add, elems4(a, c)...)
		}
	}
	const chunk = 2048 // elements per transaction: one batch must fit one sendmsg
	for len(del) > 0 {
		m := min(chunk, len(del))
		if err := n.change(del[:m], nil, nil, nil); err != nil {
			return err
		}
		res.Removed += m
		del = del[m:]
	}
	for len(add) > 0 {
		m := min(chunk, len(add))
		if err := n.change(nil, add[:m], nil, nil); err != nil {
			return err
		}
		res.Added += m
		add = add[m:]
	}
	got6, err := n.conn.GetSetElements(n.down6)
	if err != nil {
		return fmt.Errorf("nftables: listing down6: %w", err)
	}
	same := len(got6) == len(want6)
	if same {
		for _, e := range got6 {
			if e.IntervalEnd {
				continue
			}
			var k [16]byte
			copy(k[:], e.Key)
			c, ok := starts6[k]
			if !ok || len(e.Val) != 4 || nativeU32(e.Val) != c {
				same = false
				break
			}
		}
	}
	if !same {
		// Emptied and the first elements in one transaction, the rest
		// in transactions of chunk (one batch must fit one sendmsg).
		n.conn.FlushSet(n.down6)
		for first := true; first || len(want6) > 0; first = false {
			m := min(chunk, len(want6))
			if err := n.addElems(n.down6, want6[:m], false); err != nil {
				return err
			}
			if err := n.conn.Flush(); err != nil {
				return fmt.Errorf("nftables: rebuilding down6: %w", err)
			}
			want6 = want6[m:]
		}
		res.Changed++
	}
	return nil
}

func nativeU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// dropStray removes the shaper's ifb links and roots on interfaces that
// have no stored subscriber.
func (s *Service) dropStray(res *ReconcileResult, stored map[string]bool) {
	links, err := s.k.nl.LinkList()
	if err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("listing links: %v", err))
		return
	}
	ours := map[int]bool{} // links whose root is the shaper's
	if qs, err := s.k.nl.QdiscList(nil); err == nil {
		for _, q := range qs {
			if q.Attrs().Parent == netlink.HANDLE_ROOT && q.Attrs().Handle == rootHandle() {
				ours[q.Attrs().LinkIndex] = true
			}
		}
	}
	for _, l := range links {
		a := l.Attrs()
		name := ""
		if rest, ok := strings.CutPrefix(a.Alias, kernel.ShaperLinkAlias+" ifb of "); ok {
			name = rest
		} else if l.Type() != "ifb" && ours[a.Index] {
			name = a.Name
		}
		if name == "" || s.state.ifaces[name] != nil || stored[name] {
			continue
		}
		if err := s.k.dropIface(name); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("removing the shaping of %s: %v", name, err))
			continue
		}
		res.Removed++
	}
}
