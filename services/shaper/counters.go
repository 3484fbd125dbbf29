package shaper

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
)

// counters.page: what the kernel has counted for each shaped subscriber,
// for the graph service's samples and SNMP agent, which page through
// every subscriber each minute. Download is the subscriber's HTB class
// (bytes and packets sent to it, packets dropped: its leaf's drops where
// the leaf is fq_codel, the class's own where HTB's pfifo is the leaf);
// upload is what its addresses sent within its rate, the counters of its
// elements in the count sets cnt4 and cnt6_L (nft.go), IPv4 and IPv6
// summed.
//
// One page never reads the kernel by itself: a read takes every
// interface's classes (one dump per group), the fq_codel leaves (one
// qdisc dump) and every count element (gets naming them), each growing
// linearly with the subscribers (see classCounts and elemCountsOf for
// why not one dump per device or set), into a snapshot that the pages of
// a sweep share. A first page (no After) reads the kernel again unless
// the snapshot's read ended under firstPageReuse ago (two readers
// starting their sweeps together share one read); a later page uses the
// snapshot while it is under sweepReuse old, so a whole sweep of 100,000
// subscribers in pages of 10,000 costs one read and its pages carry one
// time, At (when the read began). Subscribers are the shaper's own
// records as they are when the page is asked (a subscriber removed since
// the last page is no longer listed), each mapped to its counters by the
// class id and the addresses its record holds; a subscriber whose class
// or elements the snapshot does not hold (made after the read) is
// reported with zero counters.
const (
	firstPageReuse = time.Second
	sweepReuse     = 30 * time.Second
)

// countSnap is one read of the kernel's counters.
type countSnap struct {
	at      time.Time                     // when the read began
	done    time.Time                     // when it ended
	classes map[string]map[uint32]tcCount // interface -> class id -> counters
	up      map[upKey]elemCount           // count element -> its counter
	lens    []int                         // the IPv6 lengths whose sets were read
}

// upKey is a count element: an IPv4 address (bits 0) or an IPv6 prefix's
// masked address and length.
type upKey struct {
	a    netip.Addr
	bits int
}

// counting is the service's reading side of counters.page: its own
// netlink sockets and the last snapshot, under their own lock (a read
// holds the writer's lock only to copy what it asks for, never while it
// reads the kernel).
type counting struct {
	mu   sync.Mutex
	sock *statSock
	nf   *nfSock
	snap *countSnap
}

// pageEntry is what a page needs of one subscriber's record.
type pageEntry struct {
	shape api.Shape
	class uint32
	base  *countBase
	up4   upKey
	up6   upKey // zero when none
}

// sortedIDs is the state's subscriber ids in the order of their store
// keys (escaped ids: the order of shapes.page), made again only after a
// subscriber was added or removed.
func (st *state) sortedIDs() []string {
	if st.order != nil {
		return st.order
	}
	ids := make([]string, 0, len(st.recs))
	for id := range st.recs {
		ids = append(ids, url.PathEscape(id))
	}
	slices.Sort(ids)
	for i, k := range ids {
		ids[i] = idFromKey("", k)
	}
	st.order = ids
	return ids
}

// Counters answers counters.page: a page of subscribers in id order
// (After, Limit, Next as shapes.page) with their counters.
func (s *Service) Counters(ctx context.Context, in *api.ShapePageRequest) (*api.ShapeCounterPage, error) {
	limit := in.Limit
	if limit <= 0 {
		limit = 5000
	}
	s.mu.Lock()
	if err := s.ready(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	ids := s.state.sortedIDs()
	i := 0
	if in.After != "" {
		after := url.PathEscape(in.After)
		i = sort.Search(len(ids), func(j int) bool { return url.PathEscape(ids[j]) > after })
	}
	end := min(len(ids), i+limit)
	page := make([]pageEntry, 0, end-i)
	for _, id := range ids[i:end] {
		r := s.state.recs[id]
		e := pageEntry{shape: r.Shape, class: r.Class, base: r.Base}
		if p, err := parseShape(&r.Shape); err == nil {
			e.up4 = upKey{p.ip, 0}
			if p.p6.IsValid() {
				e.up6 = upKey{p.p6.Masked().Addr(), p.p6.Bits()}
			}
		}
		page = append(page, e)
	}
	more := end < len(ids)
	ifaces := sortedKeys(s.state.ifaces)
	lens := s.state.lensList()
	s.mu.Unlock()

	snap, err := s.counts.read(s, ifaces, lens, in.After == "")
	if err != nil {
		return nil, apierr.Internal(err.Error(), "reading the kernel's counters: %v", err)
	}
	out := &api.ShapeCounterPage{Count: len(page), Counters: make([]api.ShapeCounter, len(page)), At: snap.at}
	for j, e := range page {
		c := snap.classes[e.shape.Iface][e.class]
		if b := e.base; b != nil && c.bytes >= b.Bytes && c.packets >= b.Packets && c.drops >= b.Drops {
			c.bytes, c.packets, c.drops = c.bytes-b.Bytes, c.packets-b.Packets, c.drops-b.Drops
		}
		u := snap.up[e.up4]
		if e.up6.a.IsValid() {
			u6 := snap.up[e.up6]
			u.bytes, u.packets = u.bytes+u6.bytes, u.packets+u6.packets
		}
		out.Counters[j] = api.ShapeCounter{ID: e.shape.ID, IP: e.shape.IP, Iface: e.shape.Iface, Plan: e.shape.Plan,
			DownBytes: c.bytes, DownPackets: c.packets, DownDrops: c.drops, UpBytes: u.bytes, UpPackets: u.packets}
	}
	if more && len(page) > 0 {
		out.Next = page[len(page)-1].shape.ID
	}
	return out, nil
}

// classBase reads what a spare class has counted (its earlier owner's
// traffic; a spare carries none) for a subscriber taking it: one get of
// the class, and of its leaf where the leaf may be fq_codel (which counts
// the drops). Nil when it counted nothing, or when it cannot be read (the
// subscriber then counts from the class's counters as they are).
func (s *Service) classBase(is *ifaceS, cid uint32) *countBase {
	if s.kstat == nil {
		sock, err := newStatSock(s.deps.NS)
		if err != nil {
			s.deps.Log.Warn("counters of a spare class not read", "err", err)
			return nil
		}
		s.kstat = sock
	}
	e, err := s.kstat.get(unix.RTM_GETTCLASS, is.k.index, groupQdisc(uint16(cid>>16)), cid)
	if err != nil {
		s.deps.Log.Warn("counters of a spare class not read", "class", fmt.Sprintf("%x:%x", cid>>16, cid&0xffff), "err", err)
		return nil
	}
	b := &countBase{Bytes: e.count.bytes, Packets: e.count.packets, Drops: e.count.drops}
	if s.k.leaf != "pfifo" {
		if q, err := s.kstat.get(unix.RTM_GETQDISC, is.k.index, cid, 0); err == nil && q.kind == "fq_codel" {
			b.Drops = q.count.drops
		}
	}
	if *b == (countBase{}) {
		return nil
	}
	return b
}

// read returns the snapshot, reading the kernel again when it is too old
// for a first page (first) or a later one (its age counted from the end
// of its read), or lacks an interface or a prefix length.
func (c *counting) read(s *Service, ifaces []string, lens []int, first bool) (*countSnap, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sn := c.snap; sn != nil {
		age := time.Since(sn.done)
		ok := age < sweepReuse && (!first || age < firstPageReuse)
		for _, name := range ifaces {
			if _, has := sn.classes[name]; !has {
				ok = false
			}
		}
		if ok && slices.Equal(sn.lens, lens) {
			return sn, nil
		}
	}
	if c.sock == nil {
		sock, err := newStatSock(s.deps.NS)
		if err != nil {
			return nil, err
		}
		c.sock = sock
	}
	if c.nf == nil {
		nf, err := newNfSock(s.deps.NS)
		if err != nil {
			return nil, err
		}
		c.nf = nf
	}
	what := s.countPlan()
	sn := &countSnap{at: time.Now().UTC(), classes: make(map[string]map[uint32]tcCount, len(what.ifaces)),
		up: make(map[upKey]elemCount, len(what.keys[0])*2), lens: what.lens}
	byIndex := make(map[int]bool, len(what.ifaces))
	for _, w := range what.ifaces {
		byIndex[w.index] = true
	}
	// One dump of qdiscs for every interface: the fq_codel leaves' drops
	// (none where HTB's own pfifo is the leaf: those have no handle and
	// are not dumped).
	drops, err := c.sock.leafDrops(byIndex)
	if err != nil {
		return nil, err
	}
	for name, w := range what.ifaces {
		cls, err := c.sock.classCounts(w.index, w.groups)
		if err != nil {
			return nil, err
		}
		for cid, d := range drops[w.index] {
			if cc, ok := cls[cid]; ok {
				cc.drops = d
				cls[cid] = cc
			}
		}
		sn.classes[name] = cls
	}
	for _, bits := range append([]int{0}, what.lens...) {
		name := setCnt4
		if bits > 0 {
			name = cnt6Set(bits)
		}
		els, err := c.nf.elemCountsOf(name, what.keys[bits])
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		for k, v := range els {
			if a, ok := netip.AddrFromSlice([]byte(k)); ok {
				sn.up[upKey{a, bits}] = v
			}
		}
	}
	sn.done = time.Now()
	c.snap = sn
	s.deps.Log.Debug("counters read", "subscribers", len(what.keys[0]), "took", sn.done.Sub(sn.at).Round(time.Millisecond))
	return sn, nil
}

// countWhat is what a read of the counters asks the kernel for: each
// interface's groups, and the count sets' keys (IPv4 under 0, each IPv6
// length's masked prefixes under it).
type countWhat struct {
	ifaces map[string]ifaceGroups
	keys   map[int][][]byte
	lens   []int
}

type ifaceGroups struct {
	index  int
	groups []uint16
}

// countPlan copies what a read needs from the state (under the writer's
// lock, briefly: the addresses are parsed after it).
func (s *Service) countPlan() countWhat {
	s.mu.Lock()
	w := countWhat{ifaces: make(map[string]ifaceGroups, len(s.state.ifaces)), keys: map[int][][]byte{}, lens: s.state.lensList()}
	for name, is := range s.state.ifaces {
		g := make([]uint16, 0, len(is.bins))
		for id := range is.bins {
			g = append(g, id)
		}
		slices.Sort(g)
		w.ifaces[name] = ifaceGroups{index: is.k.index, groups: g}
	}
	addrs := make([][2]string, 0, len(s.state.recs))
	for _, r := range s.state.recs {
		addrs = append(addrs, [2]string{r.IP, r.Prefix6})
	}
	s.mu.Unlock()
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a[0]); err == nil && ip.Is4() {
			b := ip.As4()
			w.keys[0] = append(w.keys[0], b[:])
		}
		if p, err := netip.ParsePrefix(a[1]); err == nil && p.Addr().Is6() {
			b := p.Masked().Addr().As16()
			w.keys[p.Bits()] = append(w.keys[p.Bits()], b[:])
		}
	}
	return w
}

func (c *counting) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sock != nil {
		c.sock.close()
	}
	if c.nf != nil {
		c.nf.close()
	}
}
