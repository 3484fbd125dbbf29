package shaper

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"routerd.dev/shared/store"
)

// ReconcileResult says what a reconcile changed in the kernel.
type ReconcileResult struct {
	Subscribers int
	// Added, Changed and Removed count kernel objects (classes, upload
	// nodes, map elements, links).
	Added, Changed, Removed int
	// SparesMade counts spare classes made to fill the interfaces'
	// pools (not drift: the shaper's own classes made ahead of need).
	SparesMade int
	Problems   []string
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
		// The stored class, when valid and not another's on the
		// interface; a new one otherwise (stored again below).
		if b := is.bins[uint16(r.Class>>16)]; !validClass(r.Class) || (b != nil && b.has(uint16(r.Class))) {
			_, cid, _, err := is.slot()
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: %v", r.ID, err))
				continue
			}
			r.Class, r.Base = cid, nil
			rewrite = append(rewrite, &r)
		}
		is.claim(r.Class, true)
		rec := r
		st.recs[r.ID] = &rec
		st.byIP[p.ip] = r.ID
		if p.p6.IsValid() {
			if q, other, ok := st.overlap6(p.p6, r.ID); ok {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: prefix6 %s overlaps %s, %s's (not shaped for it)", r.ID, p.p6, q, other))
				rec.Prefix6 = ""
			} else {
				st.add6(p.p6, r.ID)
			}
		}
	}
	res.Subscribers = len(st.recs)
	if len(rewrite) > 0 {
		if err := s.putRecords(ctx, rewrite, nil); err != nil {
			return nil, err
		}
	}
	if err := s.nft.ensure(st.lensList()); err != nil {
		return nil, err
	}
	var remade []*record // classes made again: their counters start at zero
	for _, name := range sortedKeys(st.ifaces) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.reconcileIface(st.ifaces[name], res, &remade); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("interface %s: %v", name, err))
		}
	}
	if len(remade) > 0 {
		if err := s.putRecords(ctx, remade, nil); err != nil {
			return nil, err
		}
	}
	if err := s.reconcileNft(res); err != nil {
		return nil, err
	}
	s.dropStray(res, stored)
	return res, nil
}

// reconcileIface brings one interface's classes to the state: one dump of
// classes and one of qdiscs, then only the differences. Classes under the
// shaper's root that no subscriber has are its spares (kept as they are,
// given a leaf when they lack one, and not counted as changes); groups
// with no class at all are removed. The pool is then filled to its
// target (res.SparesMade). A subscriber whose class is made again loses
// its counters' base (appended to remade, to be stored).
func (s *Service) reconcileIface(is *ifaceS, res *ReconcileResult, remade *[]*record) error {
	ik := is.k
	want := map[uint32]*record{}
	for _, r := range s.state.recs {
		if r.Iface == ik.name {
			want[r.Class] = r
		}
	}
	link := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ik.index}}
	cls, err := s.k.nl.ClassList(link, 0)
	if err != nil {
		return fmt.Errorf("listing classes: %w", err)
	}
	rate := map[uint32]uint64{} // subscriber and spare classes: bytes per second
	groups := map[uint16]bool{}
	for _, c := range cls {
		hc, ok := c.(*netlink.HtbClass)
		if !ok {
			continue
		}
		if h := hc.Attrs().Handle; h>>16 == major {
			groups[uint16(h)] = true
		} else {
			rate[h] = hc.Rate
		}
	}
	hasLeaf := map[uint32]bool{}
	if s.k.leaf != "pfifo" {
		if qs, err := s.k.nl.QdiscList(link); err == nil {
			for _, q := range qs {
				if q.Type() == "fq_codel" && q.Attrs().LinkIndex == ik.index {
					hasLeaf[q.Attrs().Parent] = true
				}
			}
		}
	}
	// Spares: classes of the shaper's groups that no subscriber has (a
	// class whose id is not one a group can hold is removed).
	for _, cid := range sortedClasses(rate) {
		if want[cid] != nil || !groups[uint16(cid>>16)] {
			continue
		}
		if !validClass(cid) {
			if err := s.k.delSub(ik, cid); err == nil {
				res.Removed++
			}
			continue
		}
		is.claim(cid, false)
		is.spares = append(is.spares, spare{class: cid, down: max(spareMbps, int64(rate[cid]*8/1_000_000))})
		if s.k.leaf != "pfifo" && !hasLeaf[cid] {
			if err := s.k.putLeaf(ik.index, cid); err != nil {
				return err
			}
		}
	}
	// Groups holding no class at all are removed.
	for g := range groups {
		if is.bins[g] == nil {
			if err := s.k.delGroup(ik, g); err == nil {
				res.Removed++
			}
		}
	}
	for gid := range is.bins {
		if !groups[gid] {
			if err := s.k.putGroup(ik, gid); err != nil {
				return err
			}
			res.Added++
		}
	}
	for cid, r := range want {
		have, ok := rate[cid]
		switch {
		case !ok || !groups[uint16(cid>>16)]:
			if err := s.k.putSub(ik, cid, r.DownMbps, true); err != nil {
				return fmt.Errorf("%s: %w", r.ID, err)
			}
			if r.Base != nil {
				r.Base = nil
				*remade = append(*remade, r)
			}
			res.Added++
		case have != uint64(r.DownMbps)*1_000_000/8:
			if err := s.k.rate(ik, cid, r.DownMbps); err != nil {
				return fmt.Errorf("%s: %w", r.ID, err)
			}
			res.Changed++
		case s.k.leaf != "pfifo" && !hasLeaf[cid]:
			if err := s.k.putLeaf(ik.index, cid); err != nil {
				return err
			}
			if s.k.leaf == "fq_codel" {
				res.Changed++
			}
		}
	}
	for len(is.spares) < spareTarget(is.count) {
		if err := s.makeSpare(is); err != nil {
			return fmt.Errorf("spare class: %w", err)
		}
		res.SparesMade++
	}
	return nil
}

func sortedClasses(m map[uint32]uint64) []uint32 {
	out := make([]uint32, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// reconcileNft brings the table's maps, count sets and limit objects to
// the state, element by element, in as few transactions as fit the send
// buffer (the messages in the order a single change makes them): limit
// objects missing or not as stored are swapped, the elements naming them
// out before and in after; a count element is kept while its address is
// stored (its count goes on), a missing one added (a table of an earlier
// version, which had no count sets). ensure has made the maps of the lengths in use and
// removed the others.
func (s *Service) reconcileNft(res *ReconcileResult) error {
	n := s.nft
	c := &nftChange{}
	type key struct {
		a    netip.Addr // IPv4, or an IPv6 prefix's masked address
		bits int        // 0 for IPv4
	}
	wantDown := map[key]uint32{}
	wantUp := map[key]string{}
	wantObj := map[string]limit{}
	wantCnt := map[key]bool{}
	for _, r := range s.state.recs {
		p, _ := parseShape(&r.Shape)
		l := upLimit(p.ip, r.UpMbps)
		wantDown[key{p.ip, 0}], wantUp[key{p.ip, 0}] = r.Class, l.name
		wantCnt[key{p.ip, 0}] = true
		wantObj[l.name] = l
		if p.p6.IsValid() {
			k := key{p.p6.Masked().Addr(), p.p6.Bits()}
			wantDown[k], wantUp[k] = r.Class, l.name
			wantCnt[k] = true
		}
	}
	// Limit objects.
	objs, err := n.sock.limits()
	if err != nil {
		return fmt.Errorf("nftables: listing limits: %w", err)
	}
	bad, have := map[string]bool{}, map[string]bool{}
	for _, o := range objs {
		if w, ok := wantObj[o.name]; !ok || w != o {
			bad[o.name] = true
			c.delObj = append(c.delObj, o.name)
		} else {
			have[o.name] = true
		}
	}
	for name, l := range wantObj {
		if !have[name] {
			c.addObj = append(c.addObj, l)
		}
	}
	// The maps: down4 and up4, then each length's down6 and up6.
	type listed struct {
		bits int
		down []elem               // keys and class ids
		up   []elem               // keys and objects
		cnt  map[string]elemCount // keys (of the count set)
	}
	down4, err := n.conn.GetSetElements(n.down4)
	if err != nil {
		return fmt.Errorf("nftables: listing down4: %w", err)
	}
	up4, err := n.sock.setElems(mapUp4)
	if err != nil {
		return fmt.Errorf("nftables: listing up4: %w", err)
	}
	cnt4, err := n.sock.elemCounts(setCnt4)
	if err != nil {
		return fmt.Errorf("nftables: listing %s: %w", setCnt4, err)
	}
	all := []listed{{bits: 0, up: up4, cnt: cnt4}}
	for _, e := range down4 {
		all[0].down = append(all[0].down, elem{key: e.Key, val: e.Val})
	}
	for _, l := range s.state.lensList() {
		d, err := n.sock.setElems(down6Map(l))
		if err != nil {
			return fmt.Errorf("nftables: listing %s: %w", down6Map(l), err)
		}
		u, err := n.sock.setElems(up6Map(l))
		if err != nil {
			return fmt.Errorf("nftables: listing %s: %w", up6Map(l), err)
		}
		cn, err := n.sock.elemCounts(cnt6Set(l))
		if err != nil {
			return fmt.Errorf("nftables: listing %s: %w", cnt6Set(l), err)
		}
		all = append(all, listed{bits: l, down: d, up: u, cnt: cn})
	}
	seenDown, seenUp, seenCnt := map[key]bool{}, map[key]bool{}, map[key]bool{}
	for _, ls := range all {
		for _, e := range ls.down {
			a, ok := netip.AddrFromSlice(e.key)
			k := key{a, ls.bits}
			if cl, w := wantDown[k]; !ok || !w || len(e.val) != 4 || nativeU32(e.val) != cl {
				if ls.bits == 0 {
					c.del4 = append(c.del4, elem{key: e.key})
				} else {
					c.del6 = append(c.del6, elem{key: e.key, bits: ls.bits})
				}
				continue
			}
			seenDown[k] = true
		}
		for _, e := range ls.up {
			a, ok := netip.AddrFromSlice(e.key)
			k := key{a, ls.bits}
			if name, w := wantUp[k]; !ok || !w || e.obj != name || bad[e.obj] {
				if ls.bits == 0 {
					c.delUp4 = append(c.delUp4, elem{key: e.key})
				} else {
					c.delUp6 = append(c.delUp6, elem{key: e.key, bits: ls.bits})
				}
				continue
			}
			seenUp[k] = true
		}
		for kb := range ls.cnt {
			a, ok := netip.AddrFromSlice([]byte(kb))
			k := key{a, ls.bits}
			if !ok || !wantCnt[k] {
				if ls.bits == 0 {
					c.delCnt4 = append(c.delCnt4, elem{key: []byte(kb)})
				} else {
					c.delCnt6 = append(c.delCnt6, elem{key: []byte(kb), bits: ls.bits})
				}
				continue
			}
			seenCnt[k] = true
		}
	}
	for k := range wantCnt {
		if seenCnt[k] {
			continue
		}
		if k.bits == 0 {
			c.addCnt4 = append(c.addCnt4, cntElems4(k.a)...)
		} else {
			c.addCnt6 = append(c.addCnt6, cntElems6(netip.PrefixFrom(k.a, k.bits))...)
		}
	}
	for k, cl := range wantDown {
		if seenDown[k] {
			continue
		}
		if k.bits == 0 {
			c.add4 = append(c.add4, elems4(k.a, cl)...)
		} else {
			c.add6 = append(c.add6, elems6(netip.PrefixFrom(k.a, k.bits), cl)...)
		}
	}
	for k, name := range wantUp {
		if seenUp[k] {
			continue
		}
		if k.bits == 0 {
			c.addUp4 = append(c.addUp4, upElems4(k.a, name)...)
		} else {
			c.addUp6 = append(c.addUp6, upElems6(netip.PrefixFrom(k.a, k.bits), name)...)
		}
	}
	res.Removed += len(c.del4) + len(c.del6) + len(c.delUp4) + len(c.delUp6) + len(c.delCnt4) + len(c.delCnt6) + len(c.delObj)
	res.Added += len(c.add4) + len(c.add6) + len(c.addUp4) + len(c.addUp6) + len(c.addCnt4) + len(c.addCnt6) + len(c.addObj)
	t, err := c.txn()
	if err != nil {
		return err
	}
	return n.sock.commitChunked(t, reconcileTxnBytes)
}

// reconcileTxnBytes bounds one transaction of the reconcile (the send
// buffer is raised to fit it).
const reconcileTxnBytes = 4 << 20

func nativeU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// dropStray removes the shaper's roots on interfaces that have no stored
// subscriber, and the upload ifb links of earlier versions (each after its
// redirect filter).
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
		if iface, ok := strings.CutPrefix(a.Alias, legacyIfbAlias("")); ok {
			if err := s.k.dropLegacyUpload(iface, l); err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("removing %s, the upload ifb of an earlier version: %v", a.Name, err))
				continue
			}
			res.Removed++
			continue
		}
		if l.Type() == "ifb" || !ours[a.Index] || s.state.ifaces[a.Name] != nil || stored[a.Name] {
			continue
		}
		if err := s.k.dropRoot(a.Name); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("removing the shaping of %s: %v", a.Name, err))
			continue
		}
		res.Removed++
	}
}
