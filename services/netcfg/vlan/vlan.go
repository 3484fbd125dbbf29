// Package vlan keeps the router's VLANs (802.1Q VLANs, 802.1ad S-VLANs and
// C-VLANs inside them) and interface addresses: validated, stored in etcd
// first, then applied to the kernel of the target namespace (package link
// for the links, netlink for the addresses), a failed apply taking the
// stored change out again. Reconcile brings the kernel to what is stored at
// start, both ways, touching only links netcfg created.
package vlan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/services/netcfg/link"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// TimeLayout is how timestamps are written in answers.
const TimeLayout = "2006-01-02 15:04:05"

// Record is a VLAN as stored under /router/netcfg/vlans/<name>.
type Record struct {
	Name       string   `json:"name"`
	Parent     string   `json:"parent"`
	VLANID     int      `json:"vlan_id"`
	Protocol   string   `json:"protocol"`
	IPs        []string `json:"ips"`
	IPs6       []string `json:"ips6"`
	Label      string   `json:"label"`
	Added      string   `json:"added"`
	Enabled    bool     `json:"enabled"`
	DisabledAt string   `json:"disabled_at,omitempty"`
	Reason     string   `json:"reason,omitempty"`
}

// PortAddr is an address on an interface netcfg did not create (a port
// or bond), stored under /router/netcfg/addresses/<iface>/<address>.
type PortAddr struct {
	Iface string `json:"iface"`
	CIDR  string `json:"cidr"`
	Added string `json:"added"`
}

func (r Record) link() link.VLAN {
	return link.VLAN{Name: r.Name, Parent: r.Parent, ID: r.VLANID, Protocol: r.Protocol, Up: r.Enabled}
}

func (r Record) addrs() []netip.Prefix { return parseAll(r.IPs, r.IPs6) }

// Book is netcfg's VLANs and addresses in one namespace: the one writer of
// both (mu), so a check and the change it allows are never interleaved.
type Book struct {
	mu sync.Mutex
	st *store.Store
	// cache holds the stored VLANs of the current term (under mu): netcfg
	// is their one writer while it holds the host lock, so a change need
	// not read every VLAN back from etcd (4,000 records a change would
	// make creating them quadratic). Use drops it; the reconcile reloads.
	cache map[string]Record
	nl    *netlink.Handle
	links *link.Manager
	// idx holds the addresses the conflict check looks at (see addrIndex).
	idx *addrIndex
	// bt batches the reconcile's link and address requests (UseBatcher);
	// nil: one netlink round trip each.
	bt  *link.Batcher
	now func() time.Time
	// Serving runs the serving steps of a new VLAN (the dhcp service's
	// operations, asked over the bus by the service); nil serves nothing
	// and says so.
	Serving Server
	// Uses asks the other services what depends on a VLAN or an address
	// (registered clients, CGNAT); nil: nothing does.
	Uses Users
	// Log receives the reconcile's phase times; nil discards them.
	Log *slog.Logger
}

// Users are the other services' refusals of a VLAN disable or delete and
// of an address delete, each reason a sentence; none when nothing
// depends on it (or when the owning service is not running).
type Users interface {
	VLANInUse(ctx context.Context, name string, deleting bool) []string
	AddrInUse(ctx context.Context, iface string, addr netip.Addr) []string
	// Forwards are the port forwards to clients behind the VLAN (they
	// stay configured while it is disabled).
	Forwards(ctx context.Context, name string) []string
}

// Server serves a new VLAN: DHCPv4 when it has an IPv4 address, DHCPv6
// with its pool and prefix delegation when it has an IPv6 one. Each step
// is reported on its own; a failed step is {error, retry} and warning says
// the VLAN is not fully served. It never undoes the VLAN.
type Server interface {
	Serve(ctx context.Context, name, label string, v4, v6 bool) (served *api.Served, warning string)
	// Unserve takes a VLAN that is being deleted out of DHCPv4, DHCPv6 and
	// prefix delegation, and removes the static routes through it: what
	// its owners removed, and what they refused (best effort: the VLAN
	// goes anyway).
	Unserve(ctx context.Context, name string) Unserved
	// Unused names what serves the subnet of an address just removed from
	// iface when no address of that subnet is left there (a DHCP subnet,
	// a delegation range): named, never removed.
	Unused(ctx context.Context, iface string, removed netip.Prefix, left []netip.Prefix, a *api.AddrAnswer)
	// Suspend takes a VLAN being disabled out of DHCPv4, DHCPv6 and
	// router advertisements, everything it is served with staying
	// configured, and names what went offline; Resume brings them back
	// and names what did. ErrNoDHCP: the dhcp service did not answer.
	Suspend(ctx context.Context, name, reason string) ([]string, error)
	Resume(ctx context.Context, name string) ([]string, error)
}

// ErrNoDHCP is Suspend's and Resume's error when the dhcp service does not
// answer (not running, standing by): the change goes ahead and the answer
// says what could not be done.
var ErrNoDHCP = errors.New("the dhcp service did not answer")

// Unserved is what the owners removed for a deleted VLAN.
type Unserved struct {
	Subnets  []string
	PDPool   any
	Routes   []string
	NAT      any
	Forwards []string
	Errors   []string
}

// NewBook manages VLANs through nl, storing in st.
func NewBook(st *store.Store, nl *netlink.Handle, now func() time.Time) *Book {
	if now == nil {
		now = time.Now
	}
	return &Book{st: st, nl: nl, links: link.New(nl), idx: newAddrIndex(), now: now, Log: slog.New(slog.DiscardHandler)}
}

// Use makes later writes go through st (the store fenced by the lock of
// the term in progress).
func (b *Book) Use(st *store.Store) {
	b.mu.Lock()
	b.st, b.cache = st, nil
	b.mu.Unlock()
}

func (b *Book) key(name string) string { return b.st.Key("vlans", name) }

func (b *Book) addrKey(iface string, p netip.Prefix) string {
	return b.st.Key("addresses", iface, strings.ReplaceAll(p.String(), "/", "_"))
}

// records is the stored VLANs by name: the term's cache, read from etcd
// the first time (with the stored port addresses, for the address index).
// Callers hold mu, and a change updates the map in place after its store
// commit (and puts it back when it undoes one), through putRec and delRec.
func (b *Book) records(ctx context.Context) (map[string]Record, error) {
	if b.cache != nil {
		return b.cache, nil
	}
	items, err := store.List[Record](ctx, b.st, b.st.Key("vlans")+"/")
	if err != nil {
		return nil, err
	}
	ports, err := b.portAddrs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Record, len(items))
	b.idx.clearStored()
	for _, it := range items {
		out[it.Value.Name] = it.Value
		b.idx.setStored("vlan:"+it.Value.Name, it.Value.Name, it.Value.addrs())
	}
	for _, a := range ports {
		if p, err := netip.ParsePrefix(a.CIDR); err == nil {
			b.idx.addStored("port:"+a.Iface, a.Iface, p)
		}
	}
	b.cache = out
	return out, nil
}

// putRec and delRec change the cached records and the index together.
func (b *Book) putRec(recs map[string]Record, r Record) {
	recs[r.Name] = r
	b.idx.setStored("vlan:"+r.Name, r.Name, r.addrs())
}

func (b *Book) delRec(recs map[string]Record, name string) {
	delete(recs, name)
	b.idx.setStored("vlan:"+name, name, nil)
}

// UseBatcher makes the reconcile create links and add addresses in
// batches through bt (a socket in the same namespace).
func (b *Book) UseBatcher(bt *link.Batcher) {
	b.mu.Lock()
	b.bt, b.links.Batch = bt, bt
	b.mu.Unlock()
}

// addrAdd is one address the reconcile adds.
type addrAdd struct {
	link int
	name string
	p    netip.Prefix
}

// addAll adds the addresses, in batches when there is a Batcher, and
// returns each one's error; the address index learns the ones added.
func (b *Book) addAll(adds []addrAdd) []error {
	errs := make([]error, len(adds))
	if b.bt != nil && len(adds) > 0 {
		reqs := make([]*nl.NetlinkRequest, len(adds))
		for i, a := range adds {
			reqs[i] = link.AddrAddRequest(a.link, a.p)
		}
		res, _ := b.bt.Do(reqs)
		for i, r := range res {
			if r.Err != nil && !errors.Is(r.Err, unix.EEXIST) {
				errs[i] = r.Err
			}
		}
	} else {
		for i, a := range adds {
			l := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: a.link, Name: a.name}}
			if err := b.nl.AddrAdd(l, toAddr(a.p)); err != nil && !errors.Is(err, unix.EEXIST) {
				errs[i] = err
			}
		}
	}
	for i, a := range adds {
		if errs[i] == nil {
			b.idx.kernel(kernelChange{link: a.link, p: a.p, add: true})
		}
	}
	return errs
}

// Follow keeps the kernel part of the address index (the namespace's
// address notifications) until ctx ends; ns is the target namespace.
func (b *Book) Follow(ctx context.Context, ns vnetns.NsHandle) {
	b.idx.follow(ctx, ns, b.nl, b.Log.Warn)
}

func (b *Book) portAddrs(ctx context.Context) ([]PortAddr, error) {
	items, err := store.List[PortAddr](ctx, b.st, b.st.Key("addresses")+"/")
	if err != nil {
		return nil, err
	}
	out := make([]PortAddr, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out, nil
}

func desired(recs map[string]Record) []link.VLAN {
	out := make([]link.VLAN, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.link())
	}
	return out
}

// kernelErr is the 500 of a change the kernel refused, with its words.
func kernelErr(err error, format string, a ...any) error {
	if errors.Is(err, link.ErrUnsupported) {
		return apierr.Internal(err.Error(), format+": this kernel has no 802.1Q/802.1ad VLAN support (module 8021q); on a development machine try the lab in the VM: make run-vm", a...)
	}
	return apierr.Internal(err.Error(), format, a...)
}

// List answers GET /vlans: stored records with their live state.
func (b *Book) List(ctx context.Context, _ *api.None) (*api.VLANList, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	recs, err := b.records(ctx)
	if err != nil {
		return nil, err
	}
	live, err := liveAddrs(b.nl)
	if err != nil {
		return nil, err
	}
	out := &api.VLANList{VLANs: make([]api.VLAN, 0, len(recs))}
	for _, r := range recs {
		v := api.VLAN{Name: r.Name, Parent: r.Parent, VLANID: r.VLANID, Protocol: r.Protocol, IPs: nonNil(r.IPs), IPs6: nonNil(r.IPs6),
			Label: r.Label, Added: r.Added, Enabled: r.Enabled, DisabledAt: r.DisabledAt, Reason: r.Reason, Status: "NOT CREATED"}
		if l, err := b.nl.LinkByName(r.Name); err == nil {
			v.Live, v.Status = true, linkState(l)
		}
		if !r.Enabled {
			v.Status = "DISABLED"
		}
		v.LiveIPs, v.LiveIPs6 = split(live[r.Name])
		out.VLANs = append(out.VLANs, v)
	}
	sort.Slice(out.VLANs, func(i, j int) bool { return out.VLANs[i].Name < out.VLANs[j].Name })
	out.Count = len(out.VLANs)
	return out, nil
}

// linkState is UP for a link that is up with carrier (a VLAN's operational
// state can read "unknown" while its lower link is up), DOWN for one set
// down, otherwise the kernel's operational state.
func linkState(l netlink.Link) string {
	a := l.Attrs()
	switch {
	case a.Flags&1 == 0:
		return "DOWN"
	case a.OperState == netlink.OperUp, a.OperState == netlink.OperUnknown && a.RawFlags&lowerUp != 0:
		return "UP"
	}
	return strings.ToUpper(a.OperState.String())
}

// lowerUp is IFF_LOWER_UP: the link has carrier.
const lowerUp = 0x10000

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// conflict finds an address on another interface whose subnet overlaps p:
// live in the kernel or stored (a disabled VLAN's addresses count). It
// asks the address index, and dumps the kernel's addresses only while the
// index is not following them. self is the interface's link index, 0 when
// it has none yet.
func (b *Book) conflict(ctx context.Context, iface string, self int, p netip.Prefix, recs map[string]Record) (string, error) {
	for {
		e, found, ok := b.idx.conflict(p, iface, self)
		if !ok {
			return b.conflictDump(ctx, iface, self, p, recs)
		}
		if !found {
			return "", nil
		}
		if e.name != "" {
			return fmt.Sprintf("%s on %s", e.p, e.name), nil
		}
		l, err := b.nl.LinkByIndex(e.link)
		if err != nil {
			// The link went (its notifications are on their way): its
			// addresses with it.
			b.idx.dropLink(e.link)
			continue
		}
		return fmt.Sprintf("%s on %s", e.p, l.Attrs().Name), nil
	}
}

// conflictDump is conflict without the index: one dump of the kernel's
// addresses, then the stored ones.
func (b *Book) conflictDump(ctx context.Context, iface string, self int, p netip.Prefix, recs map[string]Record) (string, error) {
	as, err := link.Addrs(b.nl, nil, netlink.FAMILY_ALL)
	if err != nil {
		return "", fmt.Errorf("listing addresses: %w", err)
	}
	for _, a := range as {
		if q, ok := prefixOf(a); ok && a.LinkIndex != self && q.Overlaps(p) {
			name := fmt.Sprintf("link %d", a.LinkIndex)
			if l, err := b.nl.LinkByIndex(a.LinkIndex); err == nil {
				name = l.Attrs().Name
			}
			return fmt.Sprintf("%s on %s", q, name), nil
		}
	}
	live := map[string][]netip.Prefix{}
	for _, r := range recs {
		live[r.Name] = append(live[r.Name], r.addrs()...)
	}
	ports, err := b.portAddrs(ctx)
	if err != nil {
		return "", err
	}
	for _, a := range ports {
		live[a.Iface] = append(live[a.Iface], parseAll([]string{a.CIDR})...)
	}
	names := make([]string, 0, len(live))
	for n := range live {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == iface {
			continue
		}
		for _, q := range live[n] {
			if q.Overlaps(p) {
				return fmt.Sprintf("%s on %s", q, n), nil
			}
		}
	}
	return "", nil
}

// Create answers POST /vlans.
func (b *Book) Create(ctx context.Context, in *api.VLANAdd) (*api.VLANAddAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	recs, err := b.records(ctx)
	if err != nil {
		return nil, err
	}
	name := link.Name(in.Parent, in.VLANID, in.Protocol)
	if parent, ok := recs[in.Parent]; ok {
		if parent.Protocol != link.Dot1AD || in.Protocol != link.Dot1Q {
			return nil, apierr.Invalid("parent", "a VLAN on %s must be an 802.1Q C-VLAN inside an 802.1ad S-VLAN; %s is %s", in.Parent, in.Parent, parent.Protocol)
		}
	} else if _, err := b.nl.LinkByName(in.Parent); err != nil {
		return nil, apierr.NotFound("parent %s not found (an existing port, bond or S-VLAN)", in.Parent).With("field", "parent")
	}
	if _, ok := recs[name]; ok {
		return nil, apierr.Conflict("VLAN %s exists", name).With("name", name)
	}
	for _, r := range recs {
		if r.Parent == in.Parent && r.VLANID == in.VLANID {
			return nil, apierr.Conflict("tag %d is already used on %s by %s", in.VLANID, in.Parent, r.Name).With("conflict", r.Name)
		}
	}
	if _, err := b.nl.LinkByName(name); err == nil {
		return nil, apierr.Conflict("an interface named %s exists and is not managed by the router; it is left alone", name).With("conflict", name)
	}
	rec := Record{Name: name, Parent: in.Parent, VLANID: in.VLANID, Protocol: in.Protocol, Label: in.Label,
		Added: b.now().Format(TimeLayout), Enabled: true, IPs: []string{}, IPs6: []string{}}
	a := &api.VLANAddAnswer{Name: name, Parent: in.Parent, VLANID: in.VLANID, Protocol: in.Protocol}
	var notes []string
	for _, f := range []struct {
		field, value string
		v6           bool
	}{{"ip", in.IP, false}, {"ipv6", in.IPv6, true}} {
		if f.value == "" {
			continue
		}
		p, note, err := correct(f.field, f.value)
		if err != nil {
			return nil, err
		}
		if p.Addr().Is6() != f.v6 {
			return nil, apierr.Invalid(f.field, "%s must be an IPv%s address", f.field, map[bool]string{false: "4", true: "6"}[f.v6])
		}
		if note != "" {
			notes = append(notes, note)
		}
		if c, err := b.conflict(ctx, name, 0, p, recs); err != nil { // no link of that name: looked at above
			return nil, err
		} else if c != "" && !in.Force {
			return nil, apierr.Conflict("%s overlaps %s; pass force to add it anyway", p, c).With("conflict", c).With("field", f.field)
		}
		if f.v6 {
			rec.IPs6, a.IPv6 = append(rec.IPs6, p.String()), p.String()
		} else {
			rec.IPs, a.IP = append(rec.IPs, p.String()), p.String()
		}
	}
	// Stored first: a crash between the two leaves an intent that the next
	// start applies, never a link nobody knows of.
	if _, err := b.st.Txn().IfAbsent(b.key(name)).Put(b.key(name), rec).Commit(ctx); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, apierr.Conflict("VLAN %s exists", name)
		}
		return nil, err
	}
	b.putRec(recs, rec)
	if err := b.applyNew(rec); err != nil {
		b.delRec(recs, name)
		_, _ = b.st.Txn().Delete(b.key(name)).Commit(context.WithoutCancel(ctx))
		_ = b.links.Remove(name)
		return nil, kernelErr(err, "the kernel refused VLAN %s: %v", name, err)
	}
	a.Message = "VLAN " + name + " created"
	if len(notes) > 0 {
		a.Note = strings.Join(notes, "; ")
	}
	if in.Serve == nil || *in.Serve {
		if b.Serving != nil {
			a.Served, a.Warning = b.Serving.Serve(ctx, name, in.Label, a.IP != "", a.IPv6 != "")
		} else {
			a.Served, a.Warning = &api.Served{}, "VLAN "+name+" is not served: no dhcp service to ask"
		}
	} else {
		a.Note = strings.TrimPrefix(a.Note+"; serve off: serve it later with POST /net, POST /net6 and POST /pd", "; ")
	}
	return a, nil
}

// apply brings one VLAN's link and addresses to its record, without
// looking at the others (one change through the API costs a few netlink
// calls, however many VLANs there are).
func (b *Book) apply(recs map[string]Record, name string) error {
	r := recs[name]
	_, made, err := b.links.EnsureIndexed(r.link())
	if err != nil {
		return err
	}
	if made != 0 {
		return b.addNew(r, made)
	}
	_, _, err = b.syncAddrs(name, r.addrs(), true)
	return err
}

// addNew adds the addresses of a link just made (it has none yet: nothing
// to list).
func (b *Book) addNew(r Record, index int) error {
	adds := make([]addrAdd, 0, len(r.IPs)+len(r.IPs6))
	for _, p := range r.addrs() {
		adds = append(adds, addrAdd{link: index, name: r.Name, p: p})
	}
	for i, err := range b.addAll(adds) {
		if err != nil {
			return fmt.Errorf("add %s to %s: %w", adds[i].p, r.Name, err)
		}
	}
	return nil
}

// applyNew makes the link of a new VLAN (none of its name exists: Create
// looked) and adds its addresses, listing nothing.
func (b *Book) applyNew(r Record) error {
	made, err := b.links.Make(r.link())
	if err != nil {
		return err
	}
	return b.addNew(r, made)
}

func (b *Book) get(ctx context.Context, name string) (Record, int64, error) {
	r, rev, err := store.Get[Record](ctx, b.st, b.key(name))
	if errors.Is(err, store.ErrNotFound) {
		return r, 0, apierr.NotFound("%s is not a managed VLAN", name).With("field", "name")
	}
	return r, rev, err
}

// Delete answers DELETE /vlans.
func (b *Book) Delete(ctx context.Context, in *api.VLANRef) (*api.VLANDeleteAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, rev, err := b.get(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	recs, err := b.records(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range recs {
		if o.Parent == r.Name {
			return nil, apierr.Conflict("%s is the parent of %s", r.Name, o.Name).With("fix", "delete "+o.Name+" first")
		}
	}
	if err := b.inUse(ctx, r.Name, true); err != nil {
		return nil, err
	}
	// Its subnets, delegation pool and routes go first, while the link
	// and its addresses are still there for their owners to find.
	var un Unserved
	if b.Serving != nil {
		un = b.Serving.Unserve(ctx, r.Name)
	}
	if _, err := b.st.Txn().IfRevision(b.key(r.Name), rev).Delete(b.key(r.Name)).Commit(ctx); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, apierr.Conflict("%s changed while being deleted; try again", r.Name)
		}
		return nil, err
	}
	b.delRec(recs, r.Name)
	gone, _ := b.nl.LinkByName(r.Name)
	if err := b.links.Remove(r.Name); err != nil {
		// Put the record back: the link is still there.
		b.putRec(recs, r)
		_, _ = b.st.Txn().Put(b.key(r.Name), r).Commit(context.WithoutCancel(ctx))
		return nil, kernelErr(err, "the kernel refused to remove %s: %v", r.Name, err)
	}
	if gone != nil {
		b.idx.dropLink(gone.Attrs().Index) // its addresses went with it
	}
	a := &api.VLANDeleteAnswer{Result: api.Result{Message: "VLAN " + r.Name + " deleted"}, Name: r.Name,
		RemovedSubnets: nonNil(un.Subnets), RemovedPDPool: un.PDPool, RemovedRoutes: nonNil(un.Routes), RemovedNAT: un.NAT, RemovedForwards: nonNil(un.Forwards),
		Kept: map[string]any{"rrd": nil}}
	if len(un.Errors) > 0 {
		a.Message += "; not everything depending on it could be removed: " + strings.Join(un.Errors, "; ")
	}
	return a, nil
}

// Disable answers POST /vlans/disable.
func (b *Book) Disable(ctx context.Context, in *api.VLANRef) (*api.VLANDisableAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, rev, err := b.get(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	if !r.Enabled {
		return nil, apierr.Conflict("%s is already disabled (since %s)", r.Name, r.DisabledAt)
	}
	recs, err := b.records(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range recs {
		if o.Parent == r.Name && o.Enabled {
			return nil, apierr.Conflict("%s has the enabled VLAN %s on top; disable it first", r.Name, o.Name).With("fix", "disable "+o.Name+" first")
		}
	}
	if err := b.inUse(ctx, r.Name, false); err != nil {
		return nil, err
	}
	old := r
	r.Enabled, r.DisabledAt, r.Reason = false, b.now().Format(TimeLayout), in.Reason
	// Serving goes first, while the link is still up (the advertiser's
	// last word, router lifetime 0, reaches the hosts); a link that then
	// cannot be taken down resumes it.
	a := &api.VLANDisableAnswer{Result: api.Result{Message: "VLAN " + r.Name + " disabled"}, Name: r.Name,
		DisabledAt: r.DisabledAt, Reason: r.Reason, TookOffline: []string{},
		Kept: "addresses, subnets, delegation range, NAT pool, forwards, routes and client reservations are kept"}
	if b.Serving != nil {
		off, err := b.Serving.Suspend(ctx, r.Name, in.Reason)
		switch {
		case errors.Is(err, ErrNoDHCP):
			a.Warning = "the dhcp service did not answer: DHCPv4, DHCPv6 and advertisements of " + r.Name + " could not be suspended (with its link down nothing reaches them)"
		case err != nil:
			return nil, apierr.Internal(err.Error(), "the dhcp service refused to suspend serving on %s: nothing changed", r.Name)
		default:
			a.TookOffline = off
		}
	}
	if _, err := b.change(ctx, recs, old, r, rev); err != nil {
		if len(a.TookOffline) > 0 {
			if _, rerr := b.Serving.Resume(context.WithoutCancel(ctx), r.Name); rerr != nil {
				b.Log.Error("VLAN disable failed and its serving could not be resumed", "vlan", r.Name, "err", rerr)
			}
		}
		return nil, err
	}
	a.TookOffline = append(a.TookOffline, "link")
	a.ForwardsStillActive = []string{}
	if b.Uses != nil {
		a.ForwardsStillActive = nonNil(b.Uses.Forwards(ctx, r.Name))
	}
	return a, nil
}

// inUse is the other services' refusal of a disable or delete: 409 with
// each reason under refused.
func (b *Book) inUse(ctx context.Context, name string, deleting bool) error {
	if b.Uses == nil {
		return nil
	}
	if why := b.Uses.VLANInUse(ctx, name, deleting); len(why) > 0 {
		return apierr.Conflict("%s", strings.Join(why, "; ")).With("refused", why)
	}
	return nil
}

// Enable answers POST /vlans/enable.
func (b *Book) Enable(ctx context.Context, in *api.VLANRef) (*api.VLANEnableAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, rev, err := b.get(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	if r.Enabled {
		return nil, apierr.Conflict("%s is already enabled", r.Name)
	}
	recs, err := b.records(ctx)
	if err != nil {
		return nil, err
	}
	if p, ok := recs[r.Parent]; ok && !p.Enabled {
		return nil, apierr.Conflict("the parent %s is disabled; enable it first", r.Parent).With("fix", "enable "+r.Parent+" first")
	}
	old := r
	r.Enabled, r.DisabledAt, r.Reason = true, "", ""
	// The link and its addresses first: serving needs them.
	rev, err = b.change(ctx, recs, old, r, rev)
	if err != nil {
		return nil, err
	}
	a := &api.VLANEnableAnswer{Result: api.Result{Message: "VLAN " + r.Name + " enabled"}, Name: r.Name, Enabled: true,
		Restored: append([]string{"link"}, append(append([]string{}, r.IPs...), r.IPs6...)...), WasDisabledAt: old.DisabledAt, WasDisabledReason: old.Reason}
	if b.Serving != nil {
		on, err := b.Serving.Resume(ctx, r.Name)
		switch {
		case errors.Is(err, ErrNoDHCP):
			a.Warning = "the dhcp service did not answer: DHCPv4, DHCPv6 and advertisements of " + r.Name + " were not resumed; disable and enable the VLAN again once it runs"
		case err != nil:
			// Back to disabled, as it was.
			if _, rerr := b.change(context.WithoutCancel(ctx), recs, r, old, rev); rerr != nil {
				b.Log.Error("VLAN enable failed and could not be taken back", "vlan", r.Name, "err", rerr)
			}
			return nil, apierr.Internal(err.Error(), "the dhcp service refused to resume serving on %s: the VLAN stays disabled", r.Name)
		default:
			a.Restored = append(a.Restored, on...)
		}
	}
	a.ForwardsActive = []string{}
	if b.Uses != nil {
		a.ForwardsActive = nonNil(b.Uses.Forwards(ctx, r.Name))
	}
	return a, nil
}

// change stores r over old (at rev) and applies it, returning the new
// revision; a refused apply puts old back.
func (b *Book) change(ctx context.Context, recs map[string]Record, old, r Record, rev int64) (int64, error) {
	newRev, err := b.st.Txn().IfRevision(b.key(r.Name), rev).Put(b.key(r.Name), r).Commit(ctx)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return 0, apierr.Conflict("%s changed meanwhile; try again", r.Name)
		}
		return 0, err
	}
	b.putRec(recs, r)
	if err := b.apply(recs, r.Name); err != nil {
		b.putRec(recs, old)
		_, _ = b.st.Txn().Put(b.key(r.Name), old).Commit(context.WithoutCancel(ctx))
		_ = b.apply(recs, r.Name)
		return 0, kernelErr(err, "the kernel refused the change of %s: %v", r.Name, err)
	}
	return newRev, nil
}

// Reconcile brings the kernel to the store at start: the links netcfg owns
// (created, recreated, removed) and the addresses of the stored VLANs and
// ports. It reports what it changed; problems with one VLAN do not stop
// the others.
func (b *Book) Reconcile(ctx context.Context) (changes []string, problems []string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t0 := time.Now()
	phase := func(what string) {
		now := time.Now()
		b.Log.Info("vlan reconcile", "phase", what, "took", now.Sub(t0).Round(time.Millisecond))
		t0 = now
	}
	b.cache = nil
	recs, err := b.records(ctx)
	if err != nil {
		return nil, nil, err
	}
	phase("records")
	lc, index, err := b.links.ApplyIndexed(desired(recs))
	phase("links")
	for _, c := range lc {
		changes = append(changes, c.Op+" "+c.Name)
	}
	if err != nil {
		problems = append(problems, err.Error())
	}
	// One dump of every address; the links' indexes come from the link
	// reconcile, which listed them (or made them).
	as, err := link.Addrs(b.nl, nil, netlink.FAMILY_ALL)
	if err != nil {
		return changes, problems, fmt.Errorf("listing addresses: %w", err)
	}
	live := map[int][]netip.Prefix{}
	for _, a := range as {
		if p, ok := prefixOf(a); ok {
			live[a.LinkIndex] = append(live[a.LinkIndex], p)
		}
	}
	phase("dump")
	var adds []addrAdd
	for _, r := range recs {
		i, ok := index[r.Name]
		if !ok {
			problems = append(problems, r.Name+": link missing after the reconcile")
			continue
		}
		have := map[netip.Prefix]bool{}
		for _, p := range live[i] {
			have[p] = true
		}
		wanted := map[netip.Prefix]bool{}
		for _, p := range r.addrs() {
			wanted[p] = true
			if !have[p] {
				adds = append(adds, addrAdd{link: i, name: r.Name, p: p})
			}
		}
		// Its own link: what is not stored goes.
		l := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: i, Name: r.Name}}
		for p := range have {
			if wanted[p] {
				continue
			}
			if err := b.nl.AddrDel(l, toAddr(p)); err != nil {
				problems = append(problems, fmt.Sprintf("remove %s from %s: %v", p, r.Name, err))
				continue
			}
			b.idx.kernel(kernelChange{link: i, p: p})
			changes = append(changes, "address del "+p.String()+" dev "+r.Name)
		}
	}
	for k, err := range b.addAll(adds) {
		a := adds[k]
		if err != nil {
			problems = append(problems, fmt.Sprintf("add %s to %s: %v", a.p, a.name, err))
			continue
		}
		changes = append(changes, "address add "+a.p.String()+" dev "+a.name)
	}
	phase("addresses")
	ports, err := b.portAddrs(ctx)
	if err != nil {
		return changes, problems, err
	}
	byIface := map[string][]netip.Prefix{}
	for _, a := range ports {
		byIface[a.Iface] = append(byIface[a.Iface], parseAll([]string{a.CIDR})...)
	}
	for iface, want := range byIface {
		added, _, err := b.syncAddrs(iface, want, false)
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, a := range added {
			changes = append(changes, "address add "+a+" dev "+iface)
		}
	}
	sort.Strings(changes)
	return changes, problems, nil
}

// AddAddr answers POST /ip.
func (b *Book) AddAddr(ctx context.Context, in *api.AddrChange) (*api.AddrAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, note, err := correct("ip", in.IP)
	if err != nil {
		return nil, err
	}
	l, err := b.nl.LinkByName(in.Iface)
	if err != nil {
		return nil, apierr.NotFound("interface %s not found", in.Iface).With("field", "iface")
	}
	recs, err := b.records(ctx)
	if err != nil {
		return nil, err
	}
	force := in.Force && api.OriginOf(ctx).Action != "" // no override over REST
	if c, err := b.conflict(ctx, in.Iface, l.Attrs().Index, p, recs); err != nil {
		return nil, err
	} else if c != "" && !force {
		return nil, apierr.Conflict("the subnet of %s is already on another interface: %s", p, c).With("conflict", c)
	}
	a := &api.AddrAnswer{Persisted: true}
	if note != "" {
		a.Requested, a.Assigned, a.Note = in.IP, p.String(), note
	}
	a.SetEvent(event.AddrAdded, in.Iface, p.String())
	if r, ok := recs[in.Iface]; ok {
		for _, x := range r.addrs() {
			if x == p {
				return nil, apierr.Conflict("%s is already on %s", p, in.Iface)
			}
		}
		_, rev, err := b.get(ctx, r.Name)
		if err != nil {
			return nil, err
		}
		old := r
		if p.Addr().Is4() {
			r.IPs = append(append([]string{}, r.IPs...), p.String())
		} else {
			r.IPs6 = append(append([]string{}, r.IPs6...), p.String())
		}
		if _, err := b.change(ctx, recs, old, r, rev); err != nil {
			return nil, err
		}
		a.Message = fmt.Sprintf("%s added to %s", p, in.Iface)
		return a, nil
	}
	key := b.addrKey(in.Iface, p)
	pa := PortAddr{Iface: in.Iface, CIDR: p.String(), Added: b.now().Format(TimeLayout)}
	if _, err := b.st.Txn().IfAbsent(key).Put(key, pa).Commit(ctx); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, apierr.Conflict("%s is already on %s", p, in.Iface)
		}
		return nil, err
	}
	added, _, err := b.syncAddrs(in.Iface, []netip.Prefix{p}, false)
	if err != nil {
		_, _ = b.st.Txn().Delete(key).Commit(context.WithoutCancel(ctx))
		return nil, kernelErr(err, "the kernel refused %s on %s: %v", p, in.Iface, err)
	}
	b.idx.addStored("port:"+in.Iface, in.Iface, p)
	a.Message = fmt.Sprintf("%s added to %s", p, in.Iface)
	if len(added) == 0 {
		a.Message = fmt.Sprintf("%s was already live on %s: persisted", p, in.Iface)
	}
	return a, nil
}

// DeleteAddr answers DELETE /ip; when the subnet of the address is left
// without an address on the interface, what serves it is named.
func (b *Book) DeleteAddr(ctx context.Context, in *api.AddrChange) (*api.AddrAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Uses != nil {
		if p, err := netip.ParsePrefix(in.IP); err == nil {
			if why := b.Uses.AddrInUse(ctx, in.Iface, p.Addr().Unmap()); len(why) > 0 {
				return nil, apierr.Conflict("%s", strings.Join(why, "; ")).With("refused", why)
			}
		}
	}
	a, p, err := b.deleteAddr(ctx, in)
	if err != nil || b.Serving == nil {
		return a, err
	}
	if live, err := liveAddrs(b.nl); err == nil {
		b.Serving.Unused(ctx, in.Iface, p, live[in.Iface], a)
	}
	return a, nil
}

func (b *Book) deleteAddr(ctx context.Context, in *api.AddrChange) (*api.AddrAnswer, netip.Prefix, error) {
	p, err := netip.ParsePrefix(in.IP)
	if err != nil {
		return nil, p, apierr.Invalid("ip", "invalid ip %q: want the address as assigned, in CIDR", in.IP)
	}
	p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits())
	l, err := b.nl.LinkByName(in.Iface)
	if err != nil {
		return nil, p, apierr.NotFound("interface %s not found", in.Iface).With("field", "iface")
	}
	recs, err := b.records(ctx)
	if err != nil {
		return nil, p, err
	}
	a := &api.AddrAnswer{Persisted: true, Result: api.Result{Message: fmt.Sprintf("%s removed from %s", p, in.Iface)}}
	a.SetEvent(event.AddrDeleted, in.Iface, p.String())

	if r, ok := recs[in.Iface]; ok {
		_, rev, err := b.get(ctx, r.Name)
		if err != nil {
			return nil, p, err
		}
		old := r
		r.IPs, r.IPs6 = without(r.IPs, p), without(r.IPs6, p)
		if len(r.IPs) == len(old.IPs) && len(r.IPs6) == len(old.IPs6) {
			return nil, p, apierr.NotFound("%s is not an address of %s", p, in.Iface).With("field", "ip")
		}
		if _, err := b.change(ctx, recs, old, r, rev); err != nil {
			return nil, p, err
		}
		return a, p, nil
	}
	key := b.addrKey(in.Iface, p)
	pa, rev, err := store.Get[PortAddr](ctx, b.st, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, p, apierr.NotFound("%s is not an address the router configured on %s", p, in.Iface).With("field", "ip")
	} else if err != nil {
		return nil, p, err
	}
	if _, err := b.st.Txn().IfRevision(key, rev).Delete(key).Commit(ctx); err != nil {
		return nil, p, err
	}
	if err := b.nl.AddrDel(l, toAddr(p)); err != nil && !strings.Contains(err.Error(), "cannot assign") {
		_, _ = b.st.Txn().Put(key, pa).Commit(context.WithoutCancel(ctx))
		return nil, p, kernelErr(err, "the kernel refused to remove %s from %s: %v", p, in.Iface, err)
	}
	b.idx.delStored("port:"+in.Iface, in.Iface, p)
	b.idx.kernel(kernelChange{link: l.Attrs().Index, p: p})
	return a, p, nil
}

func without(list []string, p netip.Prefix) []string {
	out := []string{}
	for _, s := range list {
		if q, err := netip.ParsePrefix(s); err == nil && q == p {
			continue
		}
		out = append(out, s)
	}
	return out
}

// OtherMethod answers the methods /ip does not take.
func (b *Book) OtherMethod(ctx context.Context, _ *api.None) (*api.Result, error) {
	return nil, apierr.BadRequest("/ip takes POST (add an address) or DELETE (remove one)")
}
