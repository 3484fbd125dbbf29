package vlan

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"routerd.dev/services/netcfg/link"
)

// addrIndex holds every address the conflict check of a new address looks
// at: the kernel's, by link index (one dump, then the namespace's address
// notifications and netcfg's own writes), and the stored ones (VLAN
// records and port addresses), by interface name. A create asks it
// instead of dumping every address of the namespace, which at 4,000 VLANs
// made each create cost three times what it did at 1,000.
//
// The addresses sit in a binary trie on their network bits (one per
// family): the prefixes containing a new one are on its path from the
// root, the ones inside it in the subtree where the path ends, so a check,
// an insertion and a removal cost the prefix length, not the number of
// addresses.
type addrIndex struct {
	mu    sync.Mutex
	roots [2]*node // IPv4, IPv6
	// stored is the stored addresses by owner ("vlan:<name>",
	// "port:<iface>").
	stored map[string][]entry
	// followed says the kernel part is loaded and followed; while it is
	// not, conflict checks dump the kernel's addresses instead.
	followed bool
	// loading queues the notifications that arrive while the initial dump
	// is read, to be replayed on it.
	loading bool
	pending []kernelChange
}

// entry is one address: a kernel one (link set) or a stored one (name set).
type entry struct {
	p    netip.Prefix // the address as assigned, with its prefix length
	link int
	name string
}

// node is one bit of a trie: the entries whose network ends here, and how
// many entries its subtree holds.
type node struct {
	child [2]*node
	here  []entry
	count int
}

type kernelChange struct {
	link int
	p    netip.Prefix
	add  bool
}

func newAddrIndex() *addrIndex {
	return &addrIndex{roots: [2]*node{{}, {}}, stored: map[string][]entry{}}
}

// bit is bit i (from the most significant) of a.
func bit(a []byte, i int) int { return int(a[i/8]>>(7-i%8)) & 1 }

func (x *addrIndex) root(p netip.Prefix) *node {
	if p.Addr().Is4() {
		return x.roots[0]
	}
	return x.roots[1]
}

// insert adds e unless it is there already.
func (x *addrIndex) insert(e entry) {
	n, a := x.root(e.p), e.p.Addr().AsSlice()
	path := make([]*node, 0, e.p.Bits()+1)
	for i := 0; i < e.p.Bits(); i++ {
		path = append(path, n)
		b := bit(a, i)
		if n.child[b] == nil {
			n.child[b] = &node{}
		}
		n = n.child[b]
	}
	for _, o := range n.here {
		if o == e {
			return
		}
	}
	n.here = append(n.here, e)
	n.count++
	for _, p := range path {
		p.count++
	}
}

// remove takes e out when it is there, pruning emptied nodes.
func (x *addrIndex) remove(e entry) {
	n, a := x.root(e.p), e.p.Addr().AsSlice()
	path := make([]*node, 0, e.p.Bits()+1)
	for i := 0; i < e.p.Bits() && n != nil; i++ {
		path = append(path, n)
		n = n.child[bit(a, i)]
	}
	if n == nil {
		return
	}
	i := slices.Index(n.here, e)
	if i < 0 {
		return
	}
	n.here = slices.Delete(n.here, i, i+1)
	n.count--
	for j := len(path) - 1; j >= 0; j-- {
		path[j].count--
		if c := path[j].child[bit(a, j)]; c != nil && c.count == 0 {
			path[j].child[bit(a, j)] = nil
		}
	}
}

// setStored makes owner's stored addresses (on the interface name) ps.
func (x *addrIndex) setStored(owner, name string, ps []netip.Prefix) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range x.stored[owner] {
		x.remove(e)
	}
	es := make([]entry, 0, len(ps))
	for _, p := range ps {
		e := entry{p: p, name: name}
		x.insert(e)
		es = append(es, e)
	}
	if len(es) == 0 {
		delete(x.stored, owner)
	} else {
		x.stored[owner] = es
	}
}

// addStored and delStored change one stored address of owner.
func (x *addrIndex) addStored(owner, name string, p netip.Prefix) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := entry{p: p, name: name}
	if !slices.Contains(x.stored[owner], e) {
		x.insert(e)
		x.stored[owner] = append(x.stored[owner], e)
	}
}

func (x *addrIndex) delStored(owner, name string, p netip.Prefix) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := entry{p: p, name: name}
	x.remove(e)
	x.stored[owner] = slices.DeleteFunc(x.stored[owner], func(o entry) bool { return o == e })
}

// clearStored drops every stored address (the store is read again).
func (x *addrIndex) clearStored() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, es := range x.stored {
		for _, e := range es {
			x.remove(e)
		}
	}
	x.stored = map[string][]entry{}
}

// kernel records a kernel address added (add) or removed on a link: a
// notification, or netcfg's own write (which the notification confirms
// later; both are idempotent).
func (x *addrIndex) kernel(c kernelChange) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.kernelLocked(c)
}

func (x *addrIndex) kernelLocked(c kernelChange) {
	if x.loading {
		x.pending = append(x.pending, c)
		return
	}
	if c.add {
		x.insert(entry{p: c.p, link: c.link})
	} else {
		x.remove(entry{p: c.p, link: c.link})
	}
}

// kernelEntries lists the kernel part (link set) of the index.
func (x *addrIndex) kernelEntries(keep func(entry) bool) []entry {
	var out []entry
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil || n.count == 0 {
			return
		}
		for _, e := range n.here {
			if e.name == "" && keep(e) {
				out = append(out, e)
			}
		}
		walk(n.child[0])
		walk(n.child[1])
	}
	for _, r := range x.roots {
		walk(r)
	}
	return out
}

// dropLink removes the kernel addresses of a link that is gone.
func (x *addrIndex) dropLink(linkIndex int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range x.kernelEntries(func(e entry) bool { return e.link == linkIndex }) {
		x.remove(e)
	}
}

// conflict finds an entry overlapping p that is not on the interface
// itself (name, or link index self; 0 when it has no link yet). ok is
// false while the kernel part is not followed: the caller asks the kernel.
func (x *addrIndex) conflict(p netip.Prefix, name string, self int) (e entry, found, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.followed {
		return entry{}, false, false
	}
	other := func(e entry) bool {
		if e.name != "" {
			return e.name != name
		}
		return self == 0 || e.link != self
	}
	// Prefixes containing p (or equal to it) lie on its path...
	n, a := x.root(p), p.Addr().AsSlice()
	for i := 0; n != nil; i++ {
		for _, e := range n.here {
			if other(e) {
				return e, true, true
			}
		}
		if i == p.Bits() {
			break
		}
		n = n.child[bit(a, i)]
	}
	// ...and the ones inside it below where the path ends.
	var below func(n *node) (entry, bool)
	below = func(n *node) (entry, bool) {
		if n == nil || n.count == 0 {
			return entry{}, false
		}
		for _, e := range n.here {
			if other(e) {
				return e, true
			}
		}
		if e, ok := below(n.child[0]); ok {
			return e, true
		}
		return below(n.child[1])
	}
	if n != nil {
		if e, ok := below(n.child[0]); ok {
			return e, true, true
		}
		if e, ok := below(n.child[1]); ok {
			return e, true, true
		}
	}
	return entry{}, false, true
}

// followBuffer is the notification socket's receive buffer: a reconcile
// adding thousands of addresses (and the kernel's link-local ones) in a
// burst must not overrun it. An overrun is survived anyway: the index is
// loaded again.
const followBuffer = 8 << 20

// follow keeps the kernel part of the index: it subscribes to the address
// notifications of the namespace, loads one dump, replays what arrived
// meanwhile, then applies each notification, until ctx ends. A broken
// subscription (an overrun socket) marks the part unknown and starts
// over a second later.
func (x *addrIndex) follow(ctx context.Context, ns vnetns.NsHandle, nl *netlink.Handle, log func(string, ...any)) {
	for ctx.Err() == nil {
		if err := x.followOnce(ctx, ns, nl); err != nil && ctx.Err() == nil {
			log("address index: following the kernel's addresses failed; conflict checks dump them meanwhile", "err", err)
		}
		x.mu.Lock()
		x.followed, x.loading, x.pending = false, false, nil
		x.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (x *addrIndex) followOnce(ctx context.Context, ns vnetns.NsHandle, nl *netlink.Handle) error {
	done := make(chan struct{})
	ch := make(chan netlink.AddrUpdate, 4096)
	defer func() {
		// Closing the socket ends the subscription's reader, which closes
		// ch; it may be sending to it meanwhile.
		close(done)
		go func() {
			for range ch {
			}
		}()
	}()
	failed := make(chan error, 1)
	x.mu.Lock()
	x.loading, x.pending = true, nil
	x.mu.Unlock()
	err := netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{
		Namespace: &ns, ReceiveBufferSize: followBuffer, ReceiveBufferForceSize: true,
		ErrorCallback: func(err error) {
			select {
			case failed <- err:
			default:
			}
		},
	})
	if err != nil {
		return fmt.Errorf("subscribing: %w", err)
	}
	// The dump comes after the subscription, so nothing is missed between
	// them: what arrives meanwhile is replayed on it (each change sets
	// one address's presence, so replaying an older one is harmless).
	loaded := make(chan error, 1)
	waiting := true
	defer func() {
		if waiting {
			<-loaded // the loader must not mark the index followed after this
		}
	}()
	go func() {
		as, err := link.Addrs(nl, nil, netlink.FAMILY_ALL)
		if err != nil {
			loaded <- err
			return
		}
		x.mu.Lock()
		for _, e := range x.kernelEntries(func(entry) bool { return true }) {
			x.remove(e)
		}
		for _, a := range as {
			if p, ok := prefixOf(a); ok {
				x.insert(entry{p: p, link: a.LinkIndex})
			}
		}
		x.loading = false
		for _, c := range x.pending {
			x.kernelLocked(c)
		}
		x.pending, x.followed = nil, true
		x.mu.Unlock()
		loaded <- nil
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-loaded:
			waiting = false
			if err != nil {
				return fmt.Errorf("listing addresses: %w", err)
			}
		case err := <-failed:
			return err
		case u, open := <-ch:
			if !open {
				return fmt.Errorf("the address notifications ended")
			}
			if p, ok := prefixOf(netlink.Addr{IPNet: &u.LinkAddress}); ok {
				x.kernel(kernelChange{link: u.LinkIndex, p: p, add: u.NewAddr})
			}
		}
	}
}
