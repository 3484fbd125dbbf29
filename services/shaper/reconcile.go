package shaper

import (
	"context"
	"fmt"
	"net/netip"
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
		if g == nil && major > 0 && major < maxGroup && is.byMajor[major] == nil {
			g = &group{g: major, net24: net24(p.ip)}
			is.addGroup(g)
		}
		if g == nil || r.Class != classOf(g, p.ip) {
			if g == nil {
				if g, _, err = is.groupFor(p.ip); err != nil {
					res.Problems = append(res.Problems, fmt.Sprintf("%s: %v", r.ID, err))
					continue
				}
				is.addGroup(g)
			}
			r.Class = classOf(g, p.ip)
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

// reconcileIface brings one interface's classes to the state: one dump of
// classes and one of qdiscs, then only the differences.
func (s *Service) reconcileIface(is *ifaceS, res *ReconcileResult) error {
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
	rate := map[uint32]uint64{} // subscriber classes: bytes per second
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
	// Removals first, children before parents: subscriber classes of
	// stored groups, then groups not stored (their classes go with them).
	for cid := range rate {
		if want[cid] == nil && is.byMajor[uint16(cid>>16)] != nil {
			if err := s.k.delSub(ik, cid); err == nil {
				res.Removed++
			}
		}
	}
	for g := range groups {
		if is.byMajor[g] == nil {
			if err := s.k.delGroup(ik, g); err == nil {
				res.Removed++
			}
		}
	}
	for gid := range is.byMajor {
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
	return nil
}

// reconcileNft brings the table's maps and limit objects to the state, in
// as few transactions as fit the send buffer (the messages in the order a
// single change makes them): down4 and up4 element by element, down6 and
// up6 (intervals) rebuilt whole when they differ at all, limit objects
// missing or different swapped.
func (s *Service) reconcileNft(res *ReconcileResult) error {
	n := s.nft
	c := &nftChange{}
	want4 := map[netip.Addr]uint32{}
	wantUp4 := map[netip.Addr]string{}
	wantObj := map[string]limit{}
	var want6, wantUp6 []elem
	for _, r := range s.state.recs {
		p, _ := parseShape(&r.Shape)
		l := upLimit(p.ip, r.UpMbps)
		want4[p.ip] = r.Class
		wantUp4[p.ip] = l.name
		wantObj[l.name] = l
		if p.p6.IsValid() {
			want6 = append(want6, elems6(p.p6, r.Class)...)
			wantUp6 = append(wantUp6, upElems6(p.p6, l.name)...)
		}
	}
	// Limit objects: those not wanted or not as wanted are swapped out;
	// every element naming one goes out first and comes back after.
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
	// down4, element by element.
	got, err := n.conn.GetSetElements(n.down4)
	if err != nil {
		return fmt.Errorf("nftables: listing down4: %w", err)
	}
	seen := map[netip.Addr]bool{}
	for _, e := range got {
		a, ok := netip.AddrFromSlice(e.Key)
		if !ok {
			continue
		}
		if cl, w := want4[a]; !w || len(e.Val) != 4 || nativeU32(e.Val) != cl {
			c.del4 = append(c.del4, elem{key: e.Key})
			continue
		}
		seen[a] = true
	}
	for a, cl := range want4 {
		if !seen[a] {
			c.add4 = append(c.add4, elems4(a, cl)...)
		}
	}
	// up4, element by element.
	gotUp4, err := n.sock.setElems(mapUp4)
	if err != nil {
		return fmt.Errorf("nftables: listing up4: %w", err)
	}
	clear(seen)
	for _, e := range gotUp4 {
		a, ok := netip.AddrFromSlice(e.key)
		if !ok {
			continue
		}
		if name, w := wantUp4[a]; !w || e.obj != name || bad[e.obj] {
			c.delUp4 = append(c.delUp4, elem{key: e.key})
			continue
		}
		seen[a] = true
	}
	for a, name := range wantUp4 {
		if !seen[a] {
			c.addUp4 = append(c.addUp4, upElems4(a, name)...)
		}
	}
	// down6 and up6, whole.
	got6, err := n.sock.setElems(mapDown6)
	if err != nil {
		return fmt.Errorf("nftables: listing down6: %w", err)
	}
	if !sameIntervals(got6, want6, nil) {
		c.del6, c.add6 = forDelete(got6), want6
		res.Changed++
	}
	gotUp6, err := n.sock.setElems(mapUp6)
	if err != nil {
		return fmt.Errorf("nftables: listing up6: %w", err)
	}
	if !sameIntervals(gotUp6, wantUp6, bad) {
		c.delUp6, c.addUp6 = forDelete(gotUp6), wantUp6
		res.Changed++
	}
	res.Removed += len(c.del4) + len(c.delUp4) + len(c.delObj)
	res.Added += len(c.add4) + len(c.addUp4) + len(c.addObj)
	return n.sock.commitChunked(c.txn(), reconcileTxnBytes)
}

// reconcileTxnBytes bounds one transaction of the reconcile (the send
// buffer is raised to fit it).
const reconcileTxnBytes = 4 << 20

// sameIntervals says whether an interval map's elements (as listed) are
// exactly want's: the same starts with the same values or objects, none of
// them naming a bad object, and as many elements.
func sameIntervals(got, want []elem, bad map[string]bool) bool {
	if len(got) != len(want) {
		return false
	}
	starts := map[[16]byte]elem{}
	for _, e := range want {
		if !e.end {
			starts[[16]byte(e.key)] = e
		}
	}
	for _, e := range got {
		if e.end {
			continue
		}
		if len(e.key) != 16 {
			return false
		}
		w, ok := starts[[16]byte(e.key)]
		if !ok || w.obj != e.obj || bad[e.obj] || string(w.val) != string(e.val) {
			return false
		}
	}
	return true
}

// forDelete is listed elements as their removal names them: keys and the
// interval-end flag.
func forDelete(els []elem) []elem {
	out := make([]elem, len(els))
	for i, e := range els {
		out[i] = elem{key: e.key, end: e.end}
	}
	return out
}

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
