package shaper

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// record is one stored subscriber: /router/shaper/shapes/<id, escaped>.
type record struct {
	api.Shape
	// Class is the subscriber's download class G:m: a free slot m
	// (1..256) of a group G of the interface, taken when the subscriber
	// came to the interface (a spare class, pool.go) and kept while it
	// stays there. (Records of earlier versions hold G its /24's group and
	// m its last octet + 1, equally valid; some also hold "node", their
	// /24's node on the upload ifb: ignored.)
	Class uint32 `json:"class"`
	// Base is what the class had counted when the subscriber took it as
	// a spare (its earlier owner's traffic): counters.page reports the
	// class's counters less it, so a subscriber's counters start at zero.
	// None when the class was made for the subscriber or counted nothing.
	Base *countBase `json:"base,omitempty"`
}

// countBase is a class's counters at a moment.
type countBase struct {
	Bytes   uint64 `json:"bytes"`
	Packets uint64 `json:"packets"`
	Drops   uint64 `json:"drops"`
}

// planRecord is a plan's rates as last given by ShaperPlan:
// /router/shaper/plans/<plan>.
type planRecord struct {
	api.PlanRates
}

type ifaceS struct {
	k      *ifaceK
	bins   map[uint16]*bin // by group
	spares []spare
	count  int // subscribers
}

type state struct {
	recs   map[string]*record
	byIP   map[netip.Addr]string
	by6    map[netip.Prefix]string
	lens   map[int]int // IPv6 prefix length -> prefixes of it
	ifaces map[string]*ifaceS
	// order is the ids in store-key order for counters.page (nil: to be
	// made again, after a subscriber came or went).
	order []string
}

func newState() *state {
	return &state{recs: map[string]*record{}, byIP: map[netip.Addr]string{}, by6: map[netip.Prefix]string{},
		lens: map[int]int{}, ifaces: map[string]*ifaceS{}}
}

// overlap6 finds a prefix of another subscriber than id that overlaps p
// (the same, inside it, or holding it): per length in use one lookup for
// the shorter ones, a scan for longer ones (only when p is shorter than
// some prefix in use).
func (st *state) overlap6(p netip.Prefix, id string) (netip.Prefix, string, bool) {
	longer := false
	for l := range st.lens {
		if l > p.Bits() {
			longer = true
			continue
		}
		q := netip.PrefixFrom(p.Addr(), l).Masked()
		if o, ok := st.by6[q]; ok && o != id {
			return q, o, true
		}
	}
	if longer {
		for q, o := range st.by6 {
			if q.Bits() > p.Bits() && o != id && p.Contains(q.Addr()) {
				return q, o, true
			}
		}
	}
	return netip.Prefix{}, "", false
}

// add6 and drop6 count a prefix in and out of the state.
func (st *state) add6(p netip.Prefix, id string) {
	st.by6[p] = id
	st.lens[p.Bits()]++
}

func (st *state) drop6(p netip.Prefix) {
	delete(st.by6, p)
	if st.lens[p.Bits()]--; st.lens[p.Bits()] <= 0 {
		delete(st.lens, p.Bits())
	}
}

// lensList is the prefix lengths in use.
func (st *state) lensList() []int { return sortedInts(st.lens) }

// lensChange fills c's length fields when old (invalid: none) giving way
// to p changes the set of prefix lengths in use.
func (st *state) lensChange(c *nftChange, old, p netip.Prefix) {
	if old == p {
		return
	}
	after := map[int]int{}
	for l, n := range st.lens {
		after[l] = n
	}
	if old.IsValid() {
		if after[old.Bits()]--; after[old.Bits()] <= 0 {
			delete(after, old.Bits())
		}
	}
	if p.IsValid() {
		after[p.Bits()]++
	}
	for l := range after {
		if st.lens[l] == 0 {
			c.newLens = append(c.newLens, l)
		}
	}
	for l := range st.lens {
		if after[l] == 0 {
			c.dropLens = append(c.dropLens, l)
		}
	}
	if len(c.newLens)+len(c.dropLens) > 0 {
		c.lens = sortedInts(after)
	}
}

func (s *Service) shapeKey(id string) string { return s.st.Key("shapes", url.PathEscape(id)) }
func (s *Service) planKey(p string) string   { return s.st.Key("plans", url.PathEscape(p)) }

// parsed is a Shape's addresses, checked.
type parsed struct {
	ip netip.Addr
	p6 netip.Prefix // invalid when none
}

func parseShape(in *api.Shape) (parsed, error) {
	var p parsed
	ip, err := netip.ParseAddr(in.IP)
	if err != nil || !ip.Is4() {
		return p, apierr.Invalid("ip", "ip must be an IPv4 address")
	}
	p.ip = ip
	if in.Prefix6 != "" {
		pr, err := netip.ParsePrefix(in.Prefix6)
		if err != nil {
			a, aerr := netip.ParseAddr(in.Prefix6)
			if aerr != nil {
				return p, apierr.Invalid("prefix6", "prefix6 must be an IPv6 address or prefix")
			}
			pr = netip.PrefixFrom(a, 128)
		}
		if !pr.Addr().Is6() || pr.Addr().Is4In6() {
			return p, apierr.Invalid("prefix6", "prefix6 must be an IPv6 address or prefix")
		}
		p.p6 = pr.Masked()
	}
	return p, nil
}

// iface returns the shaped interface name, setting it up in the kernel
// the first time.
func (s *Service) iface(name string) (*ifaceS, error) {
	if is := s.state.ifaces[name]; is != nil {
		return is, nil
	}
	ik, err := s.k.ensureIface(name)
	if errors.Is(err, errNoIface) {
		return nil, apierr.Invalid("iface", "no interface %q on the router", name)
	}
	if err != nil {
		return nil, apierr.Internal(err.Error(), "interface %s cannot be shaped: %v", name, err)
	}
	is := &ifaceS{k: ik, bins: map[uint16]*bin{}}
	s.state.ifaces[name] = is
	return is, nil
}

func (s *Service) ready() error {
	if s.w == nil || s.state == nil {
		return apierr.Unavailable("the shaper is not serving yet")
	}
	return nil
}

// Set shapes one subscriber, or changes its rates, address or interface:
// stored first, then its own class, map elements and limit object; a
// kernel refusal takes the stored change out and puts the old kernel state
// back.
func (s *Service) Set(ctx context.Context, in *api.Shape) (*api.ShapeAnswer, error) {
	p, err := parseShape(in)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(); err != nil {
		return nil, err
	}
	st := s.state
	if other, ok := st.byIP[p.ip]; ok && other != in.ID {
		return nil, apierr.Conflict("ip %s is shaped for %s", p.ip, other)
	}
	if p.p6.IsValid() {
		if q, other, ok := st.overlap6(p.p6, in.ID); ok {
			if q == p.p6 {
				return nil, apierr.Conflict("prefix6 %s is shaped for %s", p.p6, other)
			}
			return nil, apierr.Conflict("prefix6 %s overlaps %s, shaped for %s", p.p6, q, other)
		}
	}
	old := st.recs[in.ID]
	if old != nil && old.Shape == *in {
		return &api.ShapeAnswer{Result: api.Result{Code: 200, Message: "unchanged"}, Shape: &old.Shape}, nil
	}
	is, err := s.iface(in.Iface)
	if err != nil {
		return nil, err
	}
	rec := &record{Shape: *in}
	rec.Prefix6 = ""
	if p.p6.IsValid() {
		rec.Prefix6 = p.p6.String()
	}
	// The subscriber's class: its own while it stays on the interface,
	// else a spare (a class change, no creation), a new class only when
	// the interface's pool is empty.
	var pick classPick
	switch {
	case old != nil && old.Iface == in.Iface:
		rec.Class, rec.Base = old.Class, old.Base
	default:
		if sp, ok := is.popSpare(); ok {
			pick.spare = &sp
			rec.Class = sp.class
			rec.Base = s.classBase(is, sp.class)
			break
		}
		b, cid, fresh, err := is.slot()
		if err != nil {
			return nil, apierr.New(apierr.KindExhausted, "%v", err)
		}
		pick.bin, pick.fresh = b, fresh
		rec.Class = cid
	}
	s.touched()
	if _, err := s.w.Txn().Put(s.shapeKey(in.ID), rec).Commit(ctx); err != nil {
		if pick.spare != nil {
			is.pushSpare(*pick.spare)
		}
		return nil, storeErr(err)
	}
	if err := s.applySet(is, pick, old, rec, p); err != nil {
		s.undoStore(old, in.ID)
		return nil, apierr.Internal(err.Error(), "shaping %s refused by the kernel: rolled back", in.ID)
	}
	code := 201
	if old != nil {
		code = 200
	}
	out := rec.Shape
	return &api.ShapeAnswer{Result: api.Result{Code: code}, Shape: &out}, nil
}

// classPick is where a subscriber new on an interface gets its class:
// a spare taken from the pool, or a class to make in bin (a new group
// when fresh).
type classPick struct {
	spare *spare
	bin   *bin
	fresh bool
}

// applySet puts rec into the kernel and the state, removing what old had
// that rec does not; on failure it leaves the kernel and state as old had
// them. The tc side is the subscriber's class: a rate change of its own
// class or of the spare it took, or, when the interface had no spare, a
// new class (and group); the nftables side is one transaction: the
// changed map elements and, when the upload rate or an address changes,
// the limit object swapped (limit objects cannot be changed in place: the
// old elements and object out, the new object and elements in). A class
// the subscriber leaves (moving to another interface) becomes a spare
// there.
func (s *Service) applySet(is *ifaceS, pick classPick, old, rec *record, p parsed) error {
	st := s.state
	sameClass := old != nil && old.Iface == rec.Iface
	var err error
	switch {
	case pick.spare != nil:
		err = s.k.rate(is.k, rec.Class, rec.DownMbps)
	case sameClass:
		err = s.k.putSub(is.k, rec.Class, rec.DownMbps, false)
	default:
		if pick.fresh {
			if err = s.k.putGroup(is.k, pick.bin.g); err != nil {
				_ = s.k.delGroup(is.k, pick.bin.g)
				return err
			}
			is.bins[pick.bin.g] = pick.bin
		}
		err = s.k.putSub(is.k, rec.Class, rec.DownMbps, true)
	}
	undo := func() {
		switch {
		case pick.spare != nil:
			_ = s.k.rate(is.k, rec.Class, pick.spare.down)
			is.pushSpare(*pick.spare)
		case sameClass:
			_ = s.k.putSub(is.k, old.Class, old.DownMbps, false)
		default:
			_ = s.k.delSub(is.k, rec.Class)
			if pick.fresh {
				_ = s.k.delGroup(is.k, pick.bin.g)
				delete(is.bins, pick.bin.g)
			}
		}
	}
	if err != nil {
		undo()
		return err
	}
	var op parsed
	if old != nil {
		op, _ = parseShape(&old.Shape)
	}
	c := setChange(old, op, rec, p)
	st.lensChange(c, op.p6, p.p6)
	if err := s.nft.apply(c); err != nil {
		undo()
		return err
	}
	if pick.spare == nil && !sameClass {
		is.claim(rec.Class, true)
	}
	// The old class becomes a spare of its interface.
	if old != nil {
		delete(st.byIP, op.ip)
		if op.p6.IsValid() {
			st.drop6(op.p6)
		}
		if !sameClass {
			if ois := st.ifaces[old.Iface]; ois != nil {
				ois.pushSpare(spare{class: old.Class, down: old.DownMbps})
			}
		}
	}
	if old == nil {
		st.order = nil
	}
	st.recs[rec.ID] = rec
	st.byIP[p.ip] = rec.ID
	if p.p6.IsValid() {
		st.add6(p.p6, rec.ID)
	}
	return nil
}

// setChange is the nftables side of changing old (nil: none) into rec:
// only the elements and the object that differ.
func setChange(old *record, op parsed, rec *record, p parsed) *nftChange {
	c := &nftChange{}
	if old != nil {
		if op.ip != p.ip || old.Class != rec.Class {
			c.del4 = elems4(op.ip, old.Class)
		}
		if op.p6.IsValid() && (op.p6 != p.p6 || old.Class != rec.Class) {
			c.del6 = elems6(op.p6, old.Class)
		}
		// The count elements go with their address only.
		if op.ip != p.ip {
			c.delCnt4 = cntElems4(op.ip)
		}
		if op.p6.IsValid() && op.p6 != p.p6 {
			c.delCnt6 = cntElems6(op.p6)
		}
	}
	if old == nil || op.ip != p.ip {
		c.addCnt4 = cntElems4(p.ip)
	}
	if p.p6.IsValid() && (old == nil || op.p6 != p.p6) {
		c.addCnt6 = cntElems6(p.p6)
	}
	if old == nil || op.ip != p.ip || old.Class != rec.Class {
		c.add4 = elems4(p.ip, rec.Class)
	}
	if p.p6.IsValid() && (old == nil || op.p6 != p.p6 || old.Class != rec.Class) {
		c.add6 = elems6(p.p6, rec.Class)
	}
	if old != nil && op.ip == p.ip && op.p6 == p.p6 && old.UpMbps == rec.UpMbps {
		return c
	}
	if old != nil {
		delUp(c, op)
	}
	addUp(c, upLimit(p.ip, rec.UpMbps), p)
	return c
}

// delUp takes a subscriber's upload elements and its limit object out.
func delUp(c *nftChange, p parsed) {
	obj := upName(p.ip)
	c.delUp4 = append(c.delUp4, upElems4(p.ip, obj)...)
	if p.p6.IsValid() {
		c.delUp6 = append(c.delUp6, upElems6(p.p6, obj)...)
	}
	c.delObj = append(c.delObj, obj)
}

// addUp puts a subscriber's limit object and its upload elements in.
func addUp(c *nftChange, l limit, p parsed) {
	c.addObj = append(c.addObj, l)
	c.addUp4 = append(c.addUp4, upElems4(p.ip, l.name)...)
	if p.p6.IsValid() {
		c.addUp6 = append(c.addUp6, upElems6(p.p6, l.name)...)
	}
}

// undoStore puts the stored record back as it was before a refused change.
func (s *Service) undoStore(old *record, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeUndoTimeout)
	defer cancel()
	t := s.w.Txn()
	if old == nil {
		t.Delete(s.shapeKey(id))
	} else {
		t.Put(s.shapeKey(id), old)
	}
	if _, err := t.Commit(ctx); err != nil {
		s.deps.Log.Error("stored shape not rolled back (the next start's reconcile applies it)", "id", id, "err", err)
	}
}

// Remove takes one subscriber's shaping away: its record, then its map
// elements and limit object (one transaction); its class, which nothing
// names any more, becomes a spare of the interface (no tc change).
func (s *Service) Remove(ctx context.Context, in *api.ShapeRef) (*api.ShapeAnswer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(); err != nil {
		return nil, err
	}
	st := s.state
	old := st.recs[in.ID]
	if old == nil {
		return nil, apierr.NotFound("%s is not shaped", in.ID)
	}
	s.touched()
	if _, err := s.w.Txn().Delete(s.shapeKey(in.ID)).Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	op, _ := parseShape(&old.Shape)
	c := &nftChange{del4: elems4(op.ip, old.Class), delCnt4: cntElems4(op.ip)}
	if op.p6.IsValid() {
		c.del6 = elems6(op.p6, old.Class)
		c.delCnt6 = cntElems6(op.p6)
	}
	delUp(c, op)
	st.lensChange(c, op.p6, netip.Prefix{})
	if err := s.nft.apply(c); err != nil {
		s.undoStore(old, in.ID)
		return nil, apierr.Internal(err.Error(), "removing %s's shaping refused by the kernel: rolled back", in.ID)
	}
	// Its class becomes a spare (the idle tending removes spares over the
	// interface's maximum).
	if is := st.ifaces[old.Iface]; is != nil {
		is.pushSpare(spare{class: old.Class, down: old.DownMbps})
	}
	delete(st.recs, in.ID)
	st.order = nil
	delete(st.byIP, op.ip)
	if op.p6.IsValid() {
		st.drop6(op.p6)
	}
	out := old.Shape
	return &api.ShapeAnswer{Shape: &out}, nil
}

// Plan gives every subscriber of a plan its new rates: the plan's rates
// and every changed record stored first (transactions of maxTxnOps), then
// the download class of each changed in netlink batches, then every
// changed limit object swapped in one nftables transaction; a kernel
// refusal puts the changed classes and records back (the transaction is
// all or nothing by itself).
func (s *Service) Plan(ctx context.Context, in *api.PlanRates) (*api.PlanRatesAnswer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(); err != nil {
		return nil, err
	}
	s.touched()
	var changed []*record
	for _, r := range s.state.recs {
		if r.Plan == in.Plan && (r.DownMbps != in.DownMbps || r.UpMbps != in.UpMbps) {
			changed = append(changed, r)
		}
	}
	next := make([]*record, len(changed))
	for i, r := range changed {
		n := *r
		n.DownMbps, n.UpMbps = in.DownMbps, in.UpMbps
		next[i] = &n
	}
	t0 := time.Now()
	if err := s.putRecords(ctx, next, &planRecord{*in}); err != nil {
		return nil, storeErr(err)
	}
	stored := time.Since(t0)
	if err := s.changeRates(changed, next); err != nil {
		if uerr := s.changeClasses(changed); uerr != nil {
			s.deps.Log.Error("classes not put back after a refused reshape (the next start's reconcile will)", "plan", in.Plan, "err", uerr)
		}
		uctx, cancel := context.WithTimeout(context.Background(), storeUndoTimeout)
		_ = s.putRecords(uctx, changed, nil)
		cancel()
		return nil, apierr.Internal(err.Error(), "reshaping plan %s refused by the kernel: rolled back", in.Plan)
	}
	for _, r := range next {
		s.state.recs[r.ID] = r
	}
	s.deps.Log.Info("plan reshaped", "plan", in.Plan, "subscribers", len(next),
		"stored_in", stored.Round(time.Millisecond), "applied_in", (time.Since(t0) - stored).Round(time.Millisecond))
	return &api.PlanRatesAnswer{Reshaped: len(next)}, nil
}

// changeRates gives every subscriber of to its rates (from: the same
// subscribers as they are): the download classes, then the limit objects
// whose rate changes, swapped in one transaction.
func (s *Service) changeRates(from, to []*record) error {
	if err := s.changeClasses(to); err != nil {
		return err
	}
	c := &nftChange{}
	for i, r := range to {
		if from[i].UpMbps == r.UpMbps {
			continue
		}
		p, _ := parseShape(&r.Shape)
		delUp(c, p)
		addUp(c, upLimit(p.ip, r.UpMbps), p)
	}
	return s.nft.apply(c)
}

// changeClasses sets the download class of every record to its rate, in
// netlink batches.
func (s *Service) changeClasses(recs []*record) error {
	if s.batch == nil {
		b, err := newBatcher(s.deps.NS)
		if err != nil {
			return err
		}
		s.batch = b
	}
	cls := make([]*netlink.HtbClass, 0, len(recs))
	for _, r := range recs {
		is := s.state.ifaces[r.Iface]
		if is == nil {
			continue
		}
		cls = append(cls, htbClass(is.k.index, groupQdisc(uint16(r.Class>>16)), r.Class, uint64(r.DownMbps)*1_000_000))
	}
	_, err := s.batch.changeClasses(cls)
	return err
}

// maxTxnOps stays under etcd's default limit of operations per transaction.
const maxTxnOps = 100

func (s *Service) putRecords(ctx context.Context, recs []*record, plan *planRecord) error {
	t := s.w.Txn()
	n := 0
	if plan != nil {
		t.Put(s.planKey(plan.Plan), plan)
		n++
	}
	for _, r := range recs {
		t.Put(s.shapeKey(r.ID), r)
		n++
		if n == maxTxnOps {
			if _, err := t.Commit(ctx); err != nil {
				return err
			}
			t, n = s.w.Txn(), 0
		}
	}
	if n > 0 {
		_, err := t.Commit(ctx)
		return err
	}
	return nil
}

// Page lists the stored subscribers in key order (ids escaped), a page at
// a time, from etcd.
func (s *Service) Page(ctx context.Context, in *api.ShapePageRequest) (*api.ShapePage, error) {
	prefix := s.st.Key("shapes") + "/"
	from := prefix
	if in.After != "" {
		from = s.shapeKey(in.After) + "\x00"
	}
	resp, err := s.deps.KV.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(int64(in.Limit)))
	if err != nil {
		return nil, apierr.Unavailable("the store does not answer: %v", err)
	}
	out := &api.ShapePage{Shapes: make([]api.Shape, 0, len(resp.Kvs))}
	var broken []string
	for _, kv := range resp.Kvs {
		var r record
		if err := jsonUnmarshal(kv.Value, &r); err != nil {
			broken = append(broken, string(kv.Key))
			continue
		}
		out.Shapes = append(out.Shapes, r.Shape)
	}
	if len(broken) > 0 {
		return nil, &store.BrokenError{Keys: broken}
	}
	out.Count = len(out.Shapes)
	if resp.More && out.Count > 0 {
		out.Next = out.Shapes[out.Count-1].ID
	}
	return out, nil
}

// Status summarises the shaped interfaces.
func (s *Service) Status(ctx context.Context, _ *api.None) (*api.ShaperState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(); err != nil {
		return nil, err
	}
	out := &api.ShaperState{Count: len(s.state.recs), Ifaces: []api.ShaperIface{}}
	leaf := s.k.leaf
	if leaf == "" {
		leaf = "unknown"
	}
	for _, name := range sortedKeys(s.state.ifaces) {
		is := s.state.ifaces[name]
		out.Ifaces = append(out.Ifaces, api.ShaperIface{Name: name, Upload: "police", Subscribers: is.count, Leaf: leaf})
	}
	return out, nil
}

func storeErr(err error) error {
	if errors.Is(err, store.ErrLockLost) {
		return apierr.Unavailable("the shaper lost its host lock: nothing changed")
	}
	return apierr.Unavailable("the store refused the change: %v", err)
}

func isExist(err error) bool { return errors.Is(err, unix.EEXIST) }

func idFromKey(prefix, key string) string {
	id, err := url.PathUnescape(strings.TrimPrefix(key, prefix))
	if err != nil {
		return strings.TrimPrefix(key, prefix)
	}
	return id
}

var _ = fmt.Sprintf
