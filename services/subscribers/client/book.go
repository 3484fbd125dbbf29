package client

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/services/subscribers/plan"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
)

// TimeLayout is how `created` is written.
const TimeLayout = "2006-01-02 15:04:05"

// Deps are what the book is built on.
type Deps struct {
	St     *store.Store
	Plans  *plan.Book
	Nets   Networks
	Fx     Effects
	Leases Leases
	// Neigh reads the neighbour table of the router's namespace; nil
	// where the service has no namespace (every client then offline).
	Neigh Neighbours
	Now   func() time.Time
	Log   *slog.Logger
	// Pub publishes the events no single operation's answer carries (the
	// end-date reconciliation, the clients of a plan given new rates).
	Pub *bus.Publisher
}

// Book keeps the MAC clients.
type Book struct {
	d     Deps
	k     keys
	locks [256]sync.Mutex
	// expiry serialises end-date reconciliations.
	expiry sync.Mutex
}

// New returns the book.
func New(d Deps) *Book {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Book{d: d, k: keys{d.St}}
}

// lock holds one client's changes in this replica: a change's effects are
// applied in the order its records were committed.
func (b *Book) lock(mac string) func() {
	h := fnv.New32a()
	h.Write([]byte(mac))
	m := &b.locks[h.Sum32()%uint32(len(b.locks))]
	m.Lock()
	return m.Unlock
}

// Deadline is when an end date passes: a date alone is the end of that
// day, a date with a time that minute, both in the router's local time.
func Deadline(expires string) (time.Time, bool) {
	if t, err := time.ParseInLocation("2006-01-02", expires, time.Local); err == nil {
		return t.AddDate(0, 0, 1), true
	}
	if t, err := time.ParseInLocation("2006-01-02 15:04", expires, time.Local); err == nil {
		return t, true
	}
	return time.Time{}, false
}

func (b *Book) expired(c *api.Client) bool {
	if c.Expires == nil {
		return false
	}
	d, ok := Deadline(*c.Expires)
	return ok && !b.d.Now().Before(d)
}

func ptr(s string) *string { return &s }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// netOf finds the router network holding ip, asking past the cache once
// when none of the cached ones does.
func (b *Book) netOf(ctx context.Context, ip netip.Addr) (RouterNet, error) {
	for _, fresh := range []bool{false, true} {
		nets, err := b.d.Nets.Networks(ctx, fresh)
		if err != nil {
			var ae *apierr.Error
			if errors.As(err, &ae) && ae.Kind == apierr.KindUnavailable {
				return RouterNet{}, apierr.New(apierr.KindUnavailable, "the router's networks cannot be read: %s", ae.Message)
			}
			return RouterNet{}, fmt.Errorf("the router's networks cannot be read: %w", err)
		}
		best := -1
		for i, n := range nets {
			if n.Prefix.Contains(ip) && (best < 0 || n.Prefix.Bits() > nets[best].Prefix.Bits()) {
				best = i
			}
		}
		if best >= 0 {
			return nets[best], nil
		}
	}
	return RouterNet{}, apierr.Invalid("ip", "address %s is outside the router's networks", ip)
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := 32 - p.Bits()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= (1<<host - 1)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// place checks ip (and ipv6) against the router's networks and fills the
// client's iface, gateway, network and network6.
func (b *Book) place(ctx context.Context, c *api.Client) error {
	ip, err := netip.ParseAddr(c.IP)
	if err != nil || !ip.Is4() {
		return apierr.Invalid("ip", "invalid ip %q: want an IPv4 address", c.IP)
	}
	n, err := b.netOf(ctx, ip)
	if err != nil {
		return err
	}
	switch {
	case n.Prefix.Bits() > 30:
		return apierr.Invalid("ip", "network %s on %s has no address for clients", n.Prefix, n.Iface)
	case ip == n.Prefix.Addr():
		return apierr.Invalid("ip", "%s is the network address of %s", ip, n.Prefix)
	case ip == n.Gateway:
		return apierr.Invalid("ip", "%s is the gateway address of %s (%s)", ip, n.Prefix, n.Iface)
	case ip == lastAddr(n.Prefix):
		return apierr.Invalid("ip", "%s is the broadcast address of %s", ip, n.Prefix)
	}
	c.Iface, c.Gateway, c.Network, c.Network6 = n.Iface, n.Gateway.String(), ptr(n.Prefix.String()), nil
	if n.Prefix6.IsValid() {
		c.Network6 = ptr(n.Prefix6.String())
	}
	if c.IPv6 != nil {
		a, err := netip.ParseAddr(*c.IPv6)
		if err != nil || !a.Is6() || a.Is4In6() {
			return apierr.Invalid("ipv6", "invalid ipv6 %q", *c.IPv6)
		}
		switch {
		case !n.Prefix6.IsValid():
			return apierr.Invalid("ipv6", "%s has no IPv6 network for %s", n.Iface, a)
		case !n.Prefix6.Contains(a):
			return apierr.Invalid("ipv6", "%s is not on %s (%s, the interface of %s)", a, n.Prefix6, n.Iface, ip)
		case a == n.Prefix6.Addr():
			return apierr.Invalid("ipv6", "%s is the subnet-router address of %s", a, n.Prefix6)
		case a == n.Gateway6:
			return apierr.Invalid("ipv6", "%s is the gateway address of %s", a, n.Prefix6)
		}
		c.IPv6 = ptr(a.String())
	}
	return nil
}

// indexes are the index keys of c, each with its value.
func (b *Book) indexes(c *api.Client) map[string]string {
	if c == nil {
		return nil
	}
	m := map[string]string{}
	b.eachIndex(c, func(k, v string) error { m[k] = v; return nil })
	return m
}

// eachIndex gives fn each index key of c with its value, as indexes
// holds them, without a map (an import gives 400,000 of them to the
// store), stopping at fn's first error.
func (b *Book) eachIndex(c *api.Client, fn func(k, v string) error) error {
	if err := fn(b.k.ip(c.IP), c.MAC); err != nil {
		return err
	}
	if err := fn(b.k.host(c.Hostname), c.MAC); err != nil {
		return err
	}
	if c.IPv6 != nil {
		if err := fn(b.k.ipv6(*c.IPv6), c.MAC); err != nil {
			return err
		}
	}
	return fn(b.k.use(c), "")
}

// errConflict is a commit whose conditions did not hold.
var errConflict = errors.New("conflict")

// commit writes the change from old (stored at oldRev; nil for a new
// client) to new (nil to delete) in one transaction: the client's key at
// its revision, every new index key absent, and the new plan at planRev
// (so a plan deleted meanwhile fails the add, and DELETE /plans, checking
// the plan's users in its own transaction, cannot miss it). It returns
// the revision written, or errConflict.
func (b *Book) commit(ctx context.Context, old *api.Client, oldRev int64, nc *api.Client, planRev int64) (int64, error) {
	mac := ""
	if old != nil {
		mac = old.MAC
	} else {
		mac = nc.MAC
	}
	ck := b.k.client(mac)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ck), "=", oldRev)}
	var ops []clientv3.Op
	oi, ni := b.indexes(old), b.indexes(nc)
	for k := range oi {
		if _, keep := ni[k]; !keep {
			ops = append(ops, clientv3.OpDelete(k))
		}
	}
	for k, v := range ni {
		if _, had := oi[k]; !had {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
			ops = append(ops, clientv3.OpPut(k, v))
		}
	}
	if nc == nil {
		ops = append(ops, clientv3.OpDelete(ck))
	} else {
		raw, err := jsonOf(nc)
		if err != nil {
			return 0, err
		}
		ops = append(ops, clientv3.OpPut(ck, raw))
		if nc.Plan != nil && (old == nil || str(old.Plan) != *nc.Plan) {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(b.k.planOf(*nc.Plan)), "=", planRev))
		}
	}
	resp, err := b.d.St.Client().Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("clients: store %s: %w", mac, err)
	}
	if !resp.Succeeded {
		return 0, errConflict
	}
	return resp.Header.Revision, nil
}

// why explains a failed commit of nc: which unique value is taken, or the
// plan that went away; nil when nothing is (the client itself changed).
func (b *Book) why(ctx context.Context, old, nc *api.Client) error {
	if old == nil {
		if c, _, err := store.Get[api.Client](ctx, b.d.St, b.k.client(nc.MAC)); err == nil {
			return apierr.Conflict("client %s already exists", nc.MAC).With("existing", c)
		}
	}
	taken := func(k, what, v string) error {
		resp, err := b.d.St.Client().Get(ctx, k)
		if err != nil || len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) == nc.MAC {
			return nil
		}
		return apierr.Conflict("%s %s is in use by client %s", what, v, resp.Kvs[0].Value).With("field", what)
	}
	if err := taken(b.k.ip(nc.IP), "ip", nc.IP); err != nil {
		return err
	}
	if nc.IPv6 != nil {
		if err := taken(b.k.ipv6(*nc.IPv6), "ipv6", *nc.IPv6); err != nil {
			return err
		}
	}
	if err := taken(b.k.host(nc.Hostname), "hostname", nc.Hostname); err != nil {
		return err
	}
	if nc.Plan != nil {
		if _, err := b.d.Plans.Get(ctx, *nc.Plan); err != nil {
			return err
		}
	}
	return nil
}

// planRev reads the revision of the plan a client is put on (404 when none).
func (b *Book) planRev(ctx context.Context, name *string) (plan.Plan, int64, error) {
	if name == nil {
		return plan.Plan{}, 0, nil
	}
	p, rev, err := store.Get[plan.Plan](ctx, b.d.St, b.k.planOf(*name))
	if errors.Is(err, store.ErrNotFound) {
		return p, 0, apierr.NotFound("No such plan: %s", *name)
	}
	return p, rev, err
}

// planName reads a request's plan: "" and none are no plan.
func planName(s string) *string {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return nil
	}
	return &s
}

// expiresOf reads a request's end date: "" and never are none.
func expiresOf(s string) *string {
	s = strings.TrimSpace(s)
	if s == "" || s == "never" {
		return nil
	}
	return &s
}

// Add is POST /clients.
func (b *Book) Add(ctx context.Context, in *api.ClientAdd) (*api.ClientAddAnswer, error) {
	mac, err := NormalizeMAC(in.MAC)
	if err != nil {
		return nil, apierr.Invalid("mac", "%v", err)
	}
	c := api.Client{MAC: mac, IP: in.IP, Hostname: strings.TrimSpace(in.Hostname), Comment: in.Comment,
		Plan: planName(in.Plan), Expires: expiresOf(in.Expires), Created: b.d.Now().Format(TimeLayout)}
	if in.IPv6 != "" {
		c.IPv6 = ptr(in.IPv6)
	}
	if c.Hostname == "" {
		c.Hostname = "client-" + strings.ReplaceAll(mac, ":", "")
	}
	if err := b.place(ctx, &c); err != nil {
		return nil, err
	}
	if b.expired(&c) {
		c.Suspended, c.AutoSuspended = true, true
	}
	unlock := b.lock(mac)
	defer unlock()
	var rev int64
	for attempt := 0; ; attempt++ {
		_, prev, err := b.planRev(ctx, c.Plan)
		if err != nil {
			return nil, err
		}
		rev, err = b.commit(ctx, nil, 0, &c, prev)
		if err == nil {
			break
		}
		if !errors.Is(err, errConflict) {
			return nil, err
		}
		if werr := b.why(ctx, nil, &c); werr != nil {
			return nil, werr
		}
		if attempt == 4 {
			return nil, apierr.Conflict("client %s: its plan or addresses changed meanwhile; try again", mac)
		}
	}
	if err := b.apply(ctx, nil, &c, false); err != nil {
		if _, rerr := b.commit(ctx, &c, rev, nil, 0); rerr != nil {
			b.d.Log.Error("client not taken out again after its effects failed", "mac", mac, "err", rerr)
		}
		return nil, err
	}
	b.settle(ctx, mac, &c, rev)
	return &api.ClientAddAnswer{Result: api.Result{Message: "Client added"}, Client: c}, nil
}

// Delete is DELETE /clients/{mac}: the record goes first, then its
// reservation, shaping and block; when one of those cannot be removed the
// removed ones are put back and the record too.
func (b *Book) Delete(ctx context.Context, in *api.ClientRef) (*api.ClientDeleteAnswer, error) {
	mac, err := NormalizeMAC(in.MAC)
	if err != nil {
		return nil, apierr.Invalid("mac", "%v", err)
	}
	unlock := b.lock(mac)
	defer unlock()
	c, rev, err := store.Get[api.Client](ctx, b.d.St, b.k.client(mac))
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.NotFound("No such client: %s", mac)
	}
	if err != nil {
		return nil, err
	}
	if _, err := b.commit(ctx, &c, rev, nil, 0); err != nil {
		if errors.Is(err, errConflict) {
			return nil, apierr.Conflict("client %s changed while being deleted; try again", mac)
		}
		return nil, err
	}
	if err := b.apply(ctx, &c, nil, false); err != nil {
		_, prev, perr := b.planRev(ctx, c.Plan)
		if perr == nil {
			_, perr = b.commit(ctx, nil, 0, &c, prev)
		}
		if perr != nil {
			b.d.Log.Error("client not stored again after its effects could not be removed", "mac", mac, "err", perr)
		}
		return nil, err
	}
	b.settle(ctx, mac, nil, 0)
	return &api.ClientDeleteAnswer{Result: api.Result{Message: "Client deleted"}, Client: c,
		DHCP: api.DHCPOutcome{OK: true, Message: "Reservation removed"}}, nil
}

// change applies fn to one stored client: the record is committed, then
// its effects follow; when they fail, both are undone. It returns the
// client before and after.
func (b *Book) change(ctx context.Context, mac string, fn func(c *api.Client) error) (old, nc api.Client, err error) {
	unlock := b.lock(mac)
	defer unlock()
	for attempt := 0; ; attempt++ {
		var rev int64
		old, rev, err = store.Get[api.Client](ctx, b.d.St, b.k.client(mac))
		if errors.Is(err, store.ErrNotFound) {
			return old, nc, apierr.NotFound("No such client: %s", mac)
		}
		if err != nil {
			return old, nc, err
		}
		nc = old
		if err := fn(&nc); err != nil {
			return old, nc, err
		}
		_, prev, err := b.planRev(ctx, nc.Plan)
		if err != nil {
			return old, nc, err
		}
		nrev, err := b.commit(ctx, &old, rev, &nc, prev)
		if errors.Is(err, errConflict) {
			if werr := b.why(ctx, &old, &nc); werr != nil {
				return old, nc, werr
			}
			if attempt < 4 {
				continue
			}
			return old, nc, apierr.Conflict("client %s changed meanwhile; try again", mac)
		}
		if err != nil {
			return old, nc, err
		}
		if err := b.apply(ctx, &old, &nc, false); err != nil {
			_, oprev, _ := b.planRev(ctx, old.Plan)
			if _, rerr := b.commit(ctx, &nc, nrev, &old, oprev); rerr != nil {
				b.d.Log.Error("client change not undone after its effects failed", "mac", mac, "err", rerr)
			}
			return old, nc, err
		}
		b.settle(ctx, mac, &nc, nrev)
		return old, nc, nil
	}
}

// SetPlan is POST /plan.
func (b *Book) SetPlan(ctx context.Context, in *api.ClientPlanSet) (*api.ClientPlanAnswer, error) {
	mac, err := NormalizeMAC(in.MAC)
	if err != nil {
		return nil, apierr.Invalid("mac", "%v", err)
	}
	_, c, err := b.change(ctx, mac, func(c *api.Client) error { c.Plan = planName(in.Plan); return nil })
	if err != nil {
		return nil, err
	}
	msg := "Plan removed"
	if c.Plan != nil {
		msg = "Plan set to " + *c.Plan
	}
	return &api.ClientPlanAnswer{Result: api.Result{Message: msg}, MAC: mac, Plan: c.Plan, Client: c}, nil
}

// Suspend is POST /suspend: a manual suspension clears auto_suspended.
func (b *Book) Suspend(ctx context.Context, in *api.ClientRef) (*api.ClientSuspendAnswer, error) {
	return b.suspend(ctx, in.MAC, true)
}

// Resume is POST /resume.
func (b *Book) Resume(ctx context.Context, in *api.ClientRef) (*api.ClientSuspendAnswer, error) {
	return b.suspend(ctx, in.MAC, false)
}

func (b *Book) suspend(ctx context.Context, raw string, on bool) (*api.ClientSuspendAnswer, error) {
	mac, err := NormalizeMAC(raw)
	if err != nil {
		return nil, apierr.Invalid("mac", "%v", err)
	}
	_, c, err := b.change(ctx, mac, func(c *api.Client) error { c.Suspended, c.AutoSuspended = on, false; return nil })
	if err != nil {
		return nil, err
	}
	msg := "Client resumed"
	if on {
		msg = "Client suspended"
	}
	return &api.ClientSuspendAnswer{Result: api.Result{Message: msg}, MAC: mac, Suspended: c.Suspended, Client: c}, nil
}

// SetExpires is POST /expires: the client's end date is stored, then every
// client's end date reconciled.
func (b *Book) SetExpires(ctx context.Context, in *api.ClientExpiresSet) (*api.ClientExpiresAnswer, error) {
	mac, err := NormalizeMAC(in.MAC)
	if err != nil {
		return nil, apierr.Invalid("mac", "%v", err)
	}
	if _, _, err := b.change(ctx, mac, func(c *api.Client) error { c.Expires = expiresOf(in.Expires); return nil }); err != nil {
		return nil, err
	}
	if _, err := b.ReconcileExpiries(ctx); err != nil {
		return nil, err
	}
	c, _, err := store.Get[api.Client](ctx, b.d.St, b.k.client(mac))
	if err != nil {
		return nil, err
	}
	msg := "End date cleared"
	if c.Expires != nil {
		msg = "End date set to " + *c.Expires
	}
	return &api.ClientExpiresAnswer{Result: api.Result{Message: msg}, MAC: mac, Expires: c.Expires, Suspended: c.Suspended, Client: c}, nil
}

// ExpiryResult says what one end-date reconciliation did.
type ExpiryResult struct {
	Checked, Suspended, Resumed int
	Failed                      []string
}

// ReconcileExpiries suspends (auto_suspended) every client whose end date
// has passed and is not suspended yet, and resumes every auto-suspended
// client whose end date is later or gone. It reads the clients a page at
// a time.
func (b *Book) ReconcileExpiries(ctx context.Context) (ExpiryResult, error) {
	b.expiry.Lock()
	defer b.expiry.Unlock()
	var res ExpiryResult
	err := b.each(ctx, func(c *api.Client) error {
		res.Checked++
		exp := b.expired(c)
		var kind string
		var fn func(c *api.Client) error
		switch {
		case exp && !c.Suspended:
			kind, fn = api.ClientSuspended, func(c *api.Client) error {
				if !b.expired(c) || c.Suspended {
					return errUnchanged
				}
				c.Suspended, c.AutoSuspended = true, true
				return nil
			}
		case !exp && c.AutoSuspended:
			kind, fn = api.ClientResumed, func(c *api.Client) error {
				if b.expired(c) || !c.AutoSuspended {
					return errUnchanged
				}
				c.Suspended, c.AutoSuspended = false, false
				return nil
			}
		default:
			return nil
		}
		_, nc, err := b.change(ctx, c.MAC, fn)
		switch {
		case errors.Is(err, errUnchanged):
		case err != nil:
			res.Failed = append(res.Failed, c.MAC)
			b.d.Log.Warn("end date not applied", "mac", c.MAC, "err", err)
		default:
			if kind == api.ClientSuspended {
				res.Suspended++
			} else {
				res.Resumed++
			}
			b.d.Pub.Publish(kind, nil, nc)
		}
		return nil
	})
	if res.Suspended+res.Resumed+len(res.Failed) > 0 {
		b.d.Log.Info("end dates reconciled", "checked", res.Checked, "suspended", res.Suspended, "resumed", res.Resumed, "failed", len(res.Failed))
	}
	return res, err
}

var errUnchanged = errors.New("unchanged")

// each calls fn on every stored client in MAC order, a page at a time.
func (b *Book) each(ctx context.Context, fn func(c *api.Client) error) error {
	return b.eachRev(ctx, func(c *api.Client, _ int64) error { return fn(c) })
}

// eachRev is each with the revision each client was read at.
func (b *Book) eachRev(ctx context.Context, fn func(c *api.Client, rev int64) error) error {
	after := ""
	for {
		p, err := b.page(ctx, after, 2000, "")
		if err != nil {
			return err
		}
		for i := range p.Clients {
			if err := fn(&p.Clients[i], p.revs[i]); err != nil {
				return err
			}
		}
		if p.Next == "" {
			return nil
		}
		after = p.Next
	}
}

// page reads up to limit clients after the MAC `after`.
func (b *Book) page(ctx context.Context, after string, limit int, iface string) (*page, error) {
	start := b.k.clients()
	if after != "" {
		start = b.k.client(after) + "\x00"
	}
	end := clientv3.GetPrefixRangeEnd(b.k.clients())
	resp, err := b.d.St.Client().Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(int64(limit)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("clients: read: %w", err)
	}
	out := &page{ClientPage: api.ClientPage{Clients: make([]api.Client, 0, len(resp.Kvs))}}
	var broken []string
	for _, kv := range resp.Kvs {
		var c api.Client
		if err := jsonDecode(kv.Value, &c); err != nil {
			broken = append(broken, string(kv.Key))
			continue
		}
		if iface == "" || c.Iface == iface {
			out.Clients = append(out.Clients, c)
			out.revs = append(out.revs, kv.ModRevision)
		}
	}
	if len(broken) > 0 {
		return nil, &store.BrokenError{Keys: broken}
	}
	if resp.More && len(resp.Kvs) > 0 {
		out.Next = b.k.macOf(string(resp.Kvs[len(resp.Kvs)-1].Key))
	}
	out.Count = len(out.Clients)
	return out, nil
}

// Page is clients.page.
func (b *Book) Page(ctx context.Context, in *api.ClientPageRequest) (*api.ClientPage, error) {
	after := in.After
	if after != "" {
		m, err := NormalizeMAC(after)
		if err != nil {
			return nil, apierr.Invalid("after", "%v", err)
		}
		after = m
	}
	p, err := b.page(ctx, after, in.Limit, in.Iface)
	if err != nil {
		return nil, err
	}
	return &p.ClientPage, nil
}

// page is a page of clients with the revision of each.
type page struct {
	api.ClientPage
	revs []int64
}

// all reads every client.
func (b *Book) all(ctx context.Context) ([]api.Client, error) {
	items, err := store.List[api.Client](ctx, b.d.St, b.k.clients())
	if err != nil {
		return nil, err
	}
	out := make([]api.Client, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out, nil
}

// List is GET /clients.
func (b *Book) List(ctx context.Context, in *api.ClientQuery) (*api.ClientList, error) {
	var within netip.Prefix
	if in.Network != "" {
		p, err := parseCIDR(in.Network)
		if err != nil {
			return nil, apierr.Invalid("network", "invalid network %q", in.Network)
		}
		within = p
	}
	all, err := b.all(ctx)
	if err != nil {
		return nil, err
	}
	q := strings.ToLower(strings.TrimSpace(in.Q))
	out := make([]api.ClientListed, 0, len(all))
	v6, pd := b.seen6(ctx)
	for _, c := range all {
		if within.IsValid() {
			a, err := netip.ParseAddr(c.IP)
			if err != nil || !within.Contains(a) {
				continue
			}
		}
		if q != "" && !matches(&c, q) {
			continue
		}
		e := api.ClientListed{Client: c, IPv6Actual: []string{}, IPv6All: []string{}, Prefix6Delegated: pd[c.MAC]}
		if e.Prefix6Delegated == nil {
			e.Prefix6Delegated = []string{}
		}
		for _, n := range v6[c.MAC] {
			e.IPv6All = append(e.IPv6All, n.IP.String())
			if global6(n.IP) {
				e.IPv6Actual = append(e.IPv6Actual, n.IP.String())
			}
			if (c.IPv6 != nil && n.IP.String() == *c.IPv6) || (e.IPv6State == "" && global6(n.IP)) {
				e.IPv6State = n.State
			}
		}
		out = append(out, e)
	}
	return &api.ClientList{Count: len(out), Clients: out}, nil
}

func matches(c *api.Client, q string) bool {
	for _, f := range []string{c.MAC, c.IP, str(c.IPv6), c.Hostname, c.Comment, c.Iface, str(c.Network), str(c.Network6)} {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	// A MAC searched in another form.
	if m, err := NormalizeMAC(q); err == nil && m == c.MAC {
		return true
	}
	return false
}

func parseCIDR(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Get is GET /clients/{mac}: by MAC, IPv4, IPv6 or hostname.
func (b *Book) Get(ctx context.Context, in *api.ClientLookup) (*api.ClientAnswer, error) {
	s := strings.TrimSpace(in.MAC)
	mac := ""
	if m, err := NormalizeMAC(s); err == nil {
		mac = m
	} else {
		var idx string
		if a, err := netip.ParseAddr(s); err == nil {
			if a.Is4() {
				idx = b.k.ip(a.String())
			} else {
				idx = b.k.ipv6(a.String())
			}
		} else {
			idx = b.k.host(s)
		}
		resp, err := b.d.St.Client().Get(ctx, idx)
		if err != nil {
			return nil, fmt.Errorf("clients: lookup: %w", err)
		}
		if len(resp.Kvs) == 0 {
			return nil, apierr.NotFound("No client matches %s", s)
		}
		mac = string(resp.Kvs[0].Value)
	}
	c, _, err := store.Get[api.Client](ctx, b.d.St, b.k.client(mac))
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.NotFound("No client matches %s", s)
	}
	if err != nil {
		return nil, err
	}
	return &api.ClientAnswer{Client: c}, nil
}

// Summary is the client counts of GET /status: the total and per network
// from the index keys (counted, read keys only), online from the
// neighbour table.
func (b *Book) Summary(ctx context.Context, _ *api.None) (*api.ClientCounts, error) {
	n, err := b.d.St.Count(ctx, b.k.clients())
	if err != nil {
		return nil, err
	}
	out := &api.ClientCounts{Total: n, PerNetwork: map[string]int64{}}
	if n > 0 {
		// One keys-only read of the plan and network index.
		resp, err := b.d.St.Client().Get(ctx, plan.UsesPrefix(b.d.St), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
		for _, kv := range resp.Kvs {
			if _, net, _, ok := plan.ParseUse(b.d.St, string(kv.Key)); ok && net != plan.None {
				out.PerNetwork[strings.ReplaceAll(net, "_", "/")]++
			}
		}
		online, err := b.onlineCount(ctx)
		if err != nil {
			b.d.Log.Warn("online clients not counted", "err", err)
		}
		out.Online = online
	}
	return out, nil
}

// settle follows a change made by another replica meanwhile: the client's
// record is read again after its effects were applied, and when it moved
// past the revision this change wrote (rev; 0 for a delete), the effects
// of the newer record are applied, so that the owners end with what is
// stored whichever replica applied last. Failures are left to the next
// reconcile.
func (b *Book) settle(ctx context.Context, mac string, applied *api.Client, rev int64) {
	for i := 0; i < 3; i++ {
		c, cur, err := store.Get[api.Client](ctx, b.d.St, b.k.client(mac))
		var now *api.Client
		switch {
		case errors.Is(err, store.ErrNotFound):
			cur = 0
		case err != nil:
			return
		default:
			now = &c
		}
		if cur == rev {
			return
		}
		if err := b.apply(ctx, applied, now, false); err != nil {
			b.d.Log.Warn("client effects not brought to a newer record", "mac", mac, "err", err)
			return
		}
		applied, rev = now, cur
	}
}
