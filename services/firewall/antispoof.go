package firewall

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/services/firewall/nft"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
)

// Anti-spoofing (Document 2): on each enforced interface a packet passes
// only when its source MAC and address are a known pair (nft.Spoof). The
// pairs come from the clients (the subscribers service: paged through
// api.ClientsPage at start, then its client.* events) and the leases (the
// dhcp service: api.LeasesList at start, then its lease.* events); each
// change of a client or lease is the elements it adds or removes, in one
// transaction. Settings changes and POST /antispoof/sync rebuild the table.
//
// Which pairs bind: a registered client's IPv4 address and IPv6 address on
// its interface in every mode, and its DHCPv6 address and delegated prefix
// (leases of its MAC); on a dynamic interface also every lease of an
// unregistered device. Two sources of one pair share its element.

// SpoofSettings is the stored configuration (/router/firewall/antispoof).
type SpoofSettings struct {
	Enabled   bool              `json:"enabled"`
	Mode      string            `json:"mode"`
	Log       bool              `json:"log"`
	Exempt    []string          `json:"exempt"`
	Overrides map[string]string `json:"overrides"`
}

// LogGroup is the nflog group of the anti-spoofing drops.
const LogGroup = 77

// item is one source of bindings: a client (by MAC) or a lease.
type item string

type spoofer struct {
	s  *Service
	mu sync.Mutex // guards everything below; taken after s.mu when both

	k        *nft.Spoof
	settings SpoofSettings
	served   []string
	// servedKnown: dhcp answered networks.list once; clientsRead: the
	// subscribers service answered clients.page once.
	servedKnown, clientsRead bool
	clients                  map[string]api.Client // by upper-case MAC
	leases                   map[string]api.Lease  // by kind/addr
	byMAC                    map[string][]string   // upper-case MAC -> lease keys
	contrib                  map[item][]nft.Binding
	count                    map[string]int
	bindings                 map[string]nft.Binding
	enforced                 map[string]string // iface -> mode, present interfaces only
	wanted                   map[string]string // iface -> mode, present or not

	logMu   sync.Mutex
	log     []api.AntispoofLogEntry // oldest first
	alerted map[string]time.Time
	dirty   bool
}

const logKeep = 20000

func newSpoofer(s *Service) (*spoofer, error) {
	k, err := nft.OpenSpoof(s.deps.NS)
	if err != nil {
		return nil, err
	}
	return &spoofer{s: s, k: k, settings: SpoofSettings{Mode: "strict", Overrides: map[string]string{}},
		clients: map[string]api.Client{}, leases: map[string]api.Lease{}, byMAC: map[string][]string{},
		contrib: map[item][]nft.Binding{}, count: map[string]int{}, bindings: map[string]nft.Binding{},
		enforced: map[string]string{}, wanted: map[string]string{}, alerted: map[string]time.Time{}}, nil
}

func (a *spoofer) key() string { return a.s.st.Key("antispoof", "settings") }

// start loads the settings and applies them with what is known (no
// clients yet: they arrive by follow).
func (a *spoofer) start(ctx context.Context) error {
	st, _, err := store.Get[SpoofSettings](ctx, a.s.st, a.key())
	if err != nil && err != store.ErrNotFound {
		return err
	}
	if err == nil {
		if st.Mode == "" {
			st.Mode = "strict"
		}
		if st.Overrides == nil {
			st.Overrides = map[string]string{}
		}
		a.mu.Lock()
		a.settings = st
		a.mu.Unlock()
	}
	a.refreshServed(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.settings.Enabled {
		// The table in the kernel stays as it is until the clients are
		// read (follow): a restart never drops a registered subscriber.
		return nil
	}
	_, err = a.rebuildLocked()
	return err
}

// follow subscribes to the clients' and leases' events, then reads them
// whole, retrying until both services answered once; until ctx ends it
// also refreshes the served interfaces every 30 s.
func (a *spoofer) follow(ctx context.Context) {
	nc := a.s.deps.NC
	subs := []*nats.Subscription{}
	// A VLAN created, deleted, switched off or on: the enforced
	// interfaces are looked at again (a chain exists only for an
	// interface that does).
	kick := make(chan struct{}, 1)
	vsub, err := nc.Subscribe(event.SubjectPrefix+".netcfg.vlan.*", func(*nats.Msg) {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	if err == nil {
		subs = append(subs, vsub)
	}
	for _, subj := range []string{event.SubjectPrefix + ".subscribers.client.*", event.SubjectPrefix + ".dhcp.lease.*"} {
		sub, err := nc.Subscribe(subj, a.onEvent)
		if err != nil {
			a.s.deps.Log.Error("anti-spoofing cannot follow events", "subject", subj, "err", err)
			continue
		}
		subs = append(subs, sub)
	}
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	clientsDone, leasesDone := false, false
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Now()
	for {
		if !leasesDone {
			if ls, err := a.pageLeases(ctx); err == nil {
				a.setLeases(ls, clientsDone)
				leasesDone = true
			}
		}
		if !clientsDone {
			if cl, err := a.pageClients(ctx); err == nil {
				a.setClients(cl)
				clientsDone = true
			}
		}
		a.mu.Lock()
		known := a.servedKnown
		a.mu.Unlock()
		if !known || time.Since(last) > 30*time.Second {
			last = time.Now()
			if a.refreshServed(ctx) {
				a.mu.Lock()
				_, _ = a.rebuildLocked()
				a.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-kick:
			changed := a.refreshServed(ctx)
			a.mu.Lock()
			if changed || a.linksChangedLocked() {
				_, _ = a.rebuildLocked()
			}
			a.mu.Unlock()
		}
	}
}

// linksChangedLocked reports whether an interface to enforce appeared or
// an enforced one went away.
func (a *spoofer) linksChangedLocked() bool {
	for i := range a.wantedLocked() {
		if (a.enforced[i] != "") != a.linkExists(i) {
			return true
		}
	}
	return false
}

func (a *spoofer) pageClients(ctx context.Context) ([]api.Client, error) {
	var out []api.Client
	after := ""
	for {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		page, err := bus.Invoke(c, a.s.deps.NC, api.ClientsPage, &api.ClientPageRequest{After: after, Limit: 5000})
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, page.Clients...)
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

func (a *spoofer) pageLeases(ctx context.Context) ([]api.Lease, error) {
	var out []api.Lease
	after := ""
	for {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		page, err := bus.Invoke(c, a.s.deps.NC, api.LeasesList, &api.LeaseFilter{State: "bound", Limit: 1000, After: after})
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, page.Leases...)
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// refreshServed asks dhcp which interfaces it serves; true when the list
// changed.
func (a *spoofer) refreshServed(ctx context.Context) bool {
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	nets, err := bus.Invoke(c, a.s.deps.NC, api.NetworksList, &api.None{})
	if err != nil {
		return false
	}
	var served []string
	for _, n := range nets.Networks {
		if n.Iface != "" && !containsStr(served, n.Iface) {
			served = append(served, n.Iface)
		}
	}
	sort.Strings(served)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.servedKnown = true
	if strings.Join(served, ",") == strings.Join(a.served, ",") {
		return false
	}
	a.served = served
	return true
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func macKey(m string) string {
	hw, err := nft.ParseMAC(m)
	if err != nil {
		return strings.ToUpper(m)
	}
	return strings.ToUpper(hw.String())
}

func leaseKey(l api.Lease) string { return l.Kind + "/" + l.Addr.String() }

// onEvent applies one client or lease event.
func (a *spoofer) onEvent(m *nats.Msg) {
	var ev event.Event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		return
	}
	switch {
	case strings.HasPrefix(ev.Kind, "client."):
		var c api.Client
		if json.Unmarshal(ev.Data, &c) != nil || c.MAC == "" {
			return
		}
		a.clientChanged(c, ev.Kind == api.ClientDeleted)
	case strings.HasPrefix(ev.Kind, "lease."):
		var l api.Lease
		if json.Unmarshal(ev.Data, &l) != nil || !l.Addr.IsValid() {
			return
		}
		gone := ev.Kind == event.LeaseReleased || ev.Kind == event.LeaseExpired || ev.Kind == event.LeaseDeclined || l.State != "bound"
		a.leaseChanged(l, gone)
	}
}

// setClients replaces the clients (the first page-through).
func (a *spoofer) setClients(cl []api.Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clients = map[string]api.Client{}
	for _, c := range cl {
		a.clients[macKey(c.MAC)] = c
	}
	a.clientsRead = true
	a.recomputeLocked()
}

func (a *spoofer) setLeases(ls []api.Lease, apply bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.leases, a.byMAC = map[string]api.Lease{}, map[string][]string{}
	for _, l := range ls {
		if l.State != "bound" {
			continue
		}
		a.addLeaseLocked(l)
	}
	if apply {
		a.recomputeLocked()
	}
}

func (a *spoofer) addLeaseLocked(l api.Lease) {
	k := leaseKey(l)
	a.leases[k] = l
	m := macKey(l.MAC)
	if !containsStr(a.byMAC[m], k) {
		a.byMAC[m] = append(a.byMAC[m], k)
	}
}

func (a *spoofer) dropLeaseLocked(k string) {
	l, ok := a.leases[k]
	if !ok {
		return
	}
	delete(a.leases, k)
	m := macKey(l.MAC)
	keys := a.byMAC[m]
	for i, x := range keys {
		if x == k {
			keys = append(keys[:i], keys[i+1:]...)
			break
		}
	}
	if len(keys) == 0 {
		delete(a.byMAC, m)
	} else {
		a.byMAC[m] = keys
	}
}

// clientChanged applies one client's change: its own pairs and those of
// its MAC's leases (whether they bind depends on its being registered).
func (a *spoofer) clientChanged(c api.Client, deleted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := macKey(c.MAC)
	if deleted {
		delete(a.clients, m)
	} else {
		a.clients[m] = c
	}
	items := []item{item("c/" + m)}
	for _, k := range a.byMAC[m] {
		items = append(items, item("l/"+k))
	}
	a.applyLocked(items)
}

func (a *spoofer) leaseChanged(l api.Lease, gone bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := leaseKey(l)
	if gone {
		a.dropLeaseLocked(k)
	} else {
		if old, ok := a.leases[k]; ok && macKey(old.MAC) != macKey(l.MAC) {
			a.dropLeaseLocked(k)
		}
		a.addLeaseLocked(l)
	}
	a.applyLocked([]item{item("l/" + k)})
}

// bindingsOf computes what one item binds under the current settings.
func (a *spoofer) bindingsOf(it item) []nft.Binding {
	if !a.settings.Enabled {
		return nil
	}
	s := string(it)
	switch {
	case strings.HasPrefix(s, "c/"):
		c, ok := a.clients[s[2:]]
		if !ok || c.Iface == "" {
			return nil
		}
		if _, on := a.wanted[c.Iface]; !on {
			return nil
		}
		mac, err := nft.ParseMAC(c.MAC)
		if err != nil {
			return nil
		}
		var out []nft.Binding
		if ip, err := netip.ParseAddr(c.IP); err == nil && ip.Is4() {
			out = append(out, nft.Binding{Iface: c.Iface, MAC: mac, Prefix: netip.PrefixFrom(ip, 32)})
		}
		if c.IPv6 != nil && *c.IPv6 != "" {
			if p, ok := parseV6(*c.IPv6); ok {
				out = append(out, nft.Binding{Iface: c.Iface, MAC: mac, Prefix: p})
			}
		}
		return out
	case strings.HasPrefix(s, "l/"):
		l, ok := a.leases[s[2:]]
		if !ok || l.Iface == "" || l.MAC == "" {
			return nil
		}
		mode, on := a.wanted[l.Iface]
		if !on {
			return nil
		}
		_, registered := a.clients[macKey(l.MAC)]
		if registered && l.Kind == "v4" {
			return nil // a registered client is locked to its own address
		}
		// A lease answered through option 82 belongs to a fibre service
		// (its reservation names the ONT's circuit): registered too.
		service := !registered && l.CircuitID != ""
		if !registered && !service && mode != "dynamic" {
			return nil
		}
		mac, err := nft.ParseMAC(l.MAC)
		if err != nil {
			return nil
		}
		bits := l.Addr.BitLen()
		if l.Kind == "v6pd" && l.PrefixLen > 0 {
			bits = l.PrefixLen
		}
		return []nft.Binding{{Iface: l.Iface, MAC: mac, Prefix: netip.PrefixFrom(l.Addr.Unmap(), bits).Masked()}}
	}
	return nil
}

func parseV6(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is6() {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is6() && !a.Is4In6() {
		return netip.PrefixFrom(a, 128), true
	}
	return netip.Prefix{}, false
}

// applyLocked recomputes items and sends the element changes: one
// transaction for the change.
func (a *spoofer) applyLocked(items []item) {
	var adds, dels []nft.Binding
	for _, it := range items {
		old := a.contrib[it]
		next := a.bindingsOf(it)
		for _, b := range old {
			k := b.Key()
			a.count[k]--
			if a.count[k] <= 0 {
				delete(a.count, k)
				delete(a.bindings, k)
				dels = append(dels, b)
			}
		}
		for _, b := range next {
			k := b.Key()
			a.count[k]++
			if a.count[k] == 1 {
				a.bindings[k] = b
				adds = append(adds, b)
			}
		}
		if len(next) == 0 {
			delete(a.contrib, it)
		} else {
			a.contrib[it] = next
		}
	}
	// A binding removed and added back within the change is no change.
	addK := map[string]bool{}
	for _, b := range adds {
		addK[b.Key()] = true
	}
	var d2 []nft.Binding
	for _, b := range dels {
		if addK[b.Key()] {
			delete(addK, b.Key())
			continue
		}
		d2 = append(d2, b)
	}
	var a2 []nft.Binding
	for _, b := range adds {
		if addK[b.Key()] {
			a2 = append(a2, b)
		}
	}
	if !a.settings.Enabled || (len(a2) == 0 && len(d2) == 0) {
		return
	}
	err := a.k.Change(func(b *nft.SpoofBatch) {
		for _, x := range d2 {
			if a.enforced[x.Iface] != "" {
				b.Unbind(x)
			}
		}
		for _, x := range a2 {
			if a.enforced[x.Iface] != "" {
				b.Bind(x)
			}
		}
	})
	if err != nil {
		a.dirty = true
		a.s.deps.Log.Warn("anti-spoofing binding change refused by the kernel; POST /antispoof/sync rebuilds", "err", err)
	}
}

// recomputeLocked recomputes every item and rebuilds the table.
func (a *spoofer) recomputeLocked() {
	if _, err := a.rebuildLocked(); err != nil {
		a.s.deps.Log.Warn("anti-spoofing rules not applied", "err", err)
	}
}

// wantedLocked is the enforced interfaces and their modes from the
// settings and the served interfaces.
func (a *spoofer) wantedLocked() map[string]string {
	out := map[string]string{}
	if !a.settings.Enabled {
		return out
	}
	for _, i := range a.served {
		out[i] = a.settings.Mode
	}
	for i, m := range a.settings.Overrides {
		switch m {
		case "off":
			delete(out, i)
		case "strict", "dynamic":
			out[i] = m
		}
	}
	return out
}

// rebuildLocked recomputes every binding and writes the table whole (or
// removes it when the feature is off). It returns the counts applied.
func (a *spoofer) rebuildLocked() (api.AntispoofApply, error) {
	a.wanted = a.wantedLocked()
	a.contrib, a.count, a.bindings = map[item][]nft.Binding{}, map[string]int{}, map[string]nft.Binding{}
	var items []item
	for m := range a.clients {
		items = append(items, item("c/"+m))
	}
	for k := range a.leases {
		items = append(items, item("l/"+k))
	}
	for _, it := range items {
		next := a.bindingsOf(it)
		if len(next) > 0 {
			a.contrib[it] = next
		}
		for _, b := range next {
			k := b.Key()
			a.count[k]++
			a.bindings[k] = b
		}
	}
	out := api.AntispoofApply{Enabled: a.settings.Enabled}
	if !a.settings.Enabled {
		a.enforced = map[string]string{}
		if err := a.k.Remove(); err != nil {
			out.Errors = append(out.Errors, err.Error())
			return out, err
		}
		out.Applied = true
		out.Action = "rules removed"
		a.dirty = false
		return out, nil
	}
	enforced := map[string]string{}
	var ifaces []string
	for i, m := range a.wanted {
		if a.linkExists(i) {
			enforced[i] = m
			ifaces = append(ifaces, i)
		}
	}
	sort.Strings(ifaces)
	st := nft.SpoofState{Ifaces: ifaces}
	if a.settings.Log {
		st.LogGroup = LogGroup
	}
	for _, b := range a.bindings {
		if enforced[b.Iface] == "" {
			continue
		}
		st.Bindings = append(st.Bindings, b)
		if b.Prefix.Addr().Is4() {
			out.Bindings4++
		} else {
			out.Bindings6++
		}
	}
	for _, e := range a.settings.Exempt {
		if p, err := netip.ParsePrefix(e); err == nil {
			st.Exempt = append(st.Exempt, p.Masked())
		}
	}
	if err := a.k.Rebuild(st); err != nil {
		out.Errors = append(out.Errors, err.Error())
		return out, err
	}
	a.enforced = enforced
	a.dirty = false
	out.Applied = true
	return out, nil
}

func (a *spoofer) linkExists(name string) bool {
	nl, err := a.s.deps.NS.Netlink()
	if err != nil {
		return false
	}
	defer nl.Close()
	_, err = nl.LinkByName(name)
	return err == nil
}

// parseExempt reads the exempt networks (IPv4 or IPv6 CIDR or address).
func parseExempt(in []string) ([]string, error) {
	out := []string{}
	for _, e := range in {
		for _, part := range strings.Split(e, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			p, err := netip.ParsePrefix(part)
			if err != nil {
				a, aerr := netip.ParseAddr(part)
				if aerr != nil {
					return nil, apierr.Invalid("exempt", "invalid exempt network %q", part)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			out = append(out, p.Masked().String())
		}
	}
	return out, nil
}

// Set answers POST /antispoof.
func (a *spoofer) Set(ctx context.Context, in *api.AntispoofSet) (*api.AntispoofSetAnswer, error) {
	if in.Enabled == nil && in.Mode == nil && in.Log == nil && in.Exempt == nil {
		return nil, apierr.BadRequest("nothing to set: send enabled, mode, log or exempt")
	}
	var exempt []string
	if in.Exempt != nil {
		var err error
		if exempt, err = parseExempt(*in.Exempt); err != nil {
			return nil, err
		}
	}
	a.s.mu.Lock()
	w := a.s.w
	a.s.mu.Unlock()
	if w == nil {
		return nil, apierr.Unavailable("firewall: not serving yet")
	}
	a.refreshServed(ctx)
	a.mu.Lock()
	read := a.clientsRead
	a.mu.Unlock()
	if in.Enabled != nil && *in.Enabled && !read {
		// Enforcing before the clients are known would drop every
		// registered subscriber: read them now or refuse.
		cl, err := a.pageClients(ctx)
		if err != nil {
			return nil, apierr.Unavailable("the subscribers service does not answer clients.page (%v): anti-spoofing is not enabled without the registered clients", err)
		}
		a.mu.Lock()
		a.clients = map[string]api.Client{}
		for _, c := range cl {
			a.clients[macKey(c.MAC)] = c
		}
		a.clientsRead = true
		a.mu.Unlock()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.settings
	next := old
	next.Overrides = old.Overrides
	if in.Enabled != nil {
		next.Enabled = *in.Enabled
	}
	if in.Mode != nil {
		next.Mode = *in.Mode
	}
	if in.Log != nil {
		next.Log = *in.Log
	}
	if in.Exempt != nil {
		next.Exempt = exempt
	}
	if _, err := w.Txn().Put(a.key(), next).Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	a.settings = next
	apply, err := a.rebuildLocked()
	if err != nil {
		a.settings = old
		_, _ = w.Txn().Put(a.key(), old).Commit(context.WithoutCancel(ctx))
		_, _ = a.rebuildLocked()
		e := apierr.Internal(err.Error(), "anti-spoofing rules not applied")
		return nil, e.With("apply", apply)
	}
	msg := "updated"
	switch {
	case next.Enabled && !old.Enabled:
		msg = "enabled"
	case !next.Enabled && old.Enabled:
		msg = "disabled - rules removed"
	case !next.Enabled:
		msg = "is off"
	}
	return &api.AntispoofSetAnswer{Result: api.Result{Message: msg}, Apply: apply, Status: a.statusLocked()}, nil
}

// SetIface answers POST /antispoof/{iface}.
func (a *spoofer) SetIface(ctx context.Context, in *api.AntispoofIfaceSet) (*api.AntispoofIfaceAnswer, error) {
	a.s.mu.Lock()
	w := a.s.w
	a.s.mu.Unlock()
	if w == nil {
		return nil, apierr.Unavailable("firewall: not serving yet")
	}
	a.refreshServed(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.linkExists(in.Iface) && !containsStr(a.served, in.Iface) {
		return nil, apierr.NotFound("interface %s does not exist and is not served by DHCP", in.Iface)
	}
	old := a.settings
	next := old
	next.Overrides = map[string]string{}
	for k, v := range old.Overrides {
		next.Overrides[k] = v
	}
	if in.Mode == "default" {
		delete(next.Overrides, in.Iface)
	} else {
		next.Overrides[in.Iface] = in.Mode
	}
	if _, err := w.Txn().Put(a.key(), next).Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	a.settings = next
	out := &api.AntispoofIfaceAnswer{Iface: in.Iface, Requested: in.Mode}
	if !next.Enabled {
		out.Message = "mode of " + in.Iface + " recorded"
		out.Effective = "off"
		out.Note = "anti-spoofing is off: the mode takes effect when it is switched on"
		out.Apply = api.AntispoofApply{Applied: false, Action: "feature off"}
		return out, nil
	}
	apply, err := a.rebuildLocked()
	if err != nil {
		a.settings = old
		_, _ = w.Txn().Put(a.key(), old).Commit(context.WithoutCancel(ctx))
		_, _ = a.rebuildLocked()
		return nil, apierr.Internal(err.Error(), "anti-spoofing rules not applied").With("apply", apply)
	}
	out.Apply = apply
	out.Effective = a.wanted[in.Iface]
	if out.Effective == "" {
		out.Effective = "off"
	}
	out.Message = in.Iface + ": " + out.Effective
	if _, ok := a.wanted[in.Iface]; ok && a.enforced[in.Iface] == "" {
		out.Note = "the interface does not exist yet: enforced once it does (POST /antispoof/sync)"
	}
	return out, nil
}

// DeleteIface is mode default.
func (a *spoofer) DeleteIface(ctx context.Context, in *api.AntispoofIfaceRef) (*api.AntispoofIfaceAnswer, error) {
	return a.SetIface(ctx, &api.AntispoofIfaceSet{Iface: in.Iface, Mode: "default"})
}

// Sync answers POST /antispoof/sync: read the clients and leases again and
// rebuild.
func (a *spoofer) Sync(ctx context.Context, _ *api.None) (*api.AntispoofSyncAnswer, error) {
	a.refreshServed(ctx)
	if cl, err := a.pageClients(ctx); err == nil {
		a.mu.Lock()
		a.clients = map[string]api.Client{}
		for _, c := range cl {
			a.clients[macKey(c.MAC)] = c
		}
		a.clientsRead = true
		a.mu.Unlock()
	}
	if ls, err := a.pageLeases(ctx); err == nil {
		a.mu.Lock()
		a.leases, a.byMAC = map[string]api.Lease{}, map[string][]string{}
		for _, l := range ls {
			a.addLeaseLocked(l)
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.settings.Enabled {
		return &api.AntispoofSyncAnswer{Result: api.Result{Message: "anti-spoofing is off: nothing to apply"}}, nil
	}
	apply, err := a.rebuildLocked()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "anti-spoofing rules not applied").With("apply", apply)
	}
	return &api.AntispoofSyncAnswer{Result: api.Result{Message: fmt.Sprintf("rules rebuilt: %d IPv4 and %d IPv6 bindings", apply.Bindings4, apply.Bindings6)},
		Applied: true, Enabled: true}, nil
}

// Status answers GET /antispoof.
func (a *spoofer) Status(ctx context.Context, _ *api.None) (*api.AntispoofStatus, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.statusLocked()
	return &st, nil
}

func (a *spoofer) statusLocked() api.AntispoofStatus {
	st := api.AntispoofStatus{Enabled: a.settings.Enabled, Mode: a.settings.Mode, Log: a.settings.Log,
		Exempt: append([]string{}, a.settings.Exempt...), Overrides: map[string]string{}, Served: append([]string{}, a.served...),
		Enforced: map[string]api.AntispoofIface{}, SwitchedOff: []string{},
		LogPrefixes: []string{strings.TrimSpace(nft.PrefixSpoof), strings.TrimSpace(nft.PrefixARPSpoof)}}
	for k, v := range a.settings.Overrides {
		st.Overrides[k] = v
		if v == "off" {
			st.SwitchedOff = append(st.SwitchedOff, k)
		}
	}
	sort.Strings(st.SwitchedOff)
	var drops map[string]nft.Counters
	var rules map[string]int
	if a.settings.Enabled {
		drops, rules, _ = a.k.Drops()
	}
	// One pass over the sources and the pairs, counted per interface.
	type counts struct{ clients, service, leases, b4, b6 int }
	per := map[string]*counts{}
	at := func(i string) *counts {
		c := per[i]
		if c == nil {
			c = &counts{}
			per[i] = c
		}
		return c
	}
	for it, bs := range a.contrib {
		if len(bs) == 0 {
			continue
		}
		c := at(bs[0].Iface)
		k := string(it)
		switch {
		case strings.HasPrefix(k, "c/"):
			c.clients++
		default:
			l := a.leases[k[2:]]
			if _, reg := a.clients[macKey(l.MAC)]; reg {
				continue // counted with its client
			}
			if l.CircuitID != "" {
				c.service++
			} else {
				c.leases++
			}
		}
	}
	for _, b := range a.bindings {
		if b.Prefix.Addr().Is4() {
			at(b.Iface).b4++
		} else {
			at(b.Iface).b6++
		}
	}
	total := 0
	for i, m := range a.wantedLocked() {
		c := at(i)
		d := drops[i]
		st.Enforced[i] = api.AntispoofIface{Mode: m, Exists: a.enforced[i] != "", Bindings4: c.b4, Bindings6: c.b6,
			Dropped: api.AntispoofDropped{IP4: d.IP4, IP6: d.IP6, ARP: d.ARP}, Clients: c.clients, Service: c.service, Leases: c.leases}
		total += rules[i]
	}
	if a.settings.Enabled && len(a.enforced) > 0 {
		chain := "netdev " + nft.SpoofTable + " sp_<iface> (ingress)"
		st.Live = api.AntispoofLive{V4Chain: chain, V4Rules: total, V4Forward: true, V4Input: true,
			V6Chain: chain, V6Rules: total, V6Forward: true, V6Input: true}
	}
	since := a.s.deps.Now().Add(-time.Hour)
	a.logMu.Lock()
	devices := map[string]bool{}
	for i := len(a.log) - 1; i >= 0; i-- {
		t, _ := time.Parse(time.RFC3339, a.log[i].Time)
		if t.Before(since) {
			break
		}
		st.LastHour.Attempts++
		devices[a.log[i].MAC] = true
	}
	a.logMu.Unlock()
	st.LastHour.Devices = len(devices)
	return st
}

// Mode answers the /status question.
func (a *spoofer) Mode(ctx context.Context, _ *api.None) (*api.AntispoofMode, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.settings.Enabled {
		return &api.AntispoofMode{Mode: "off"}, nil
	}
	return &api.AntispoofMode{Mode: a.settings.Mode}, nil
}

// readLog receives the kernel's logged drops until ctx ends.
func (a *spoofer) readLog(ctx context.Context) {
	r, err := nft.ListenLog(a.s.deps.NS, LogGroup)
	if err != nil {
		a.s.deps.Log.Warn("anti-spoofing drops are not logged", "err", err)
		return
	}
	go func() { <-ctx.Done(); r.Close() }()
	names := map[int]string{}
	for {
		pkts, err := r.Read()
		if err != nil {
			if ctx.Err() == nil {
				a.s.deps.Log.Warn("anti-spoofing log reader stopped", "err", err)
			}
			return
		}
		for _, p := range pkts {
			d, ok := nft.Decode(p)
			if !ok {
				continue
			}
			name, ok := names[p.IfIndex]
			if !ok {
				if nl, err := a.s.deps.NS.Netlink(); err == nil {
					if l, err := nl.LinkByIndex(p.IfIndex); err == nil {
						name = l.Attrs().Name
						names[p.IfIndex] = name
					}
					nl.Close()
				}
			}
			e := api.AntispoofLogEntry{Time: p.Time.UTC().Format(time.RFC3339), Kind: d.Kind, Iface: name,
				MAC: strings.ToUpper(net.HardwareAddr(p.MAC).String()), Src: d.Src.String(), Dst: d.Dst.String(),
				Proto: d.Proto, Dport: d.Dport, Op: d.Op}
			a.record(e)
		}
	}
}

// record keeps an entry and raises a spoof event at most once a minute
// per interface and MAC.
func (a *spoofer) record(e api.AntispoofLogEntry) {
	a.logMu.Lock()
	a.log = append(a.log, e)
	if len(a.log) > logKeep {
		a.log = append([]api.AntispoofLogEntry(nil), a.log[len(a.log)-logKeep/2:]...)
	}
	k := e.Iface + " " + e.MAC
	now := time.Now()
	raise := now.Sub(a.alerted[k]) > time.Minute
	if raise {
		a.alerted[k] = now
	}
	a.logMu.Unlock()
	if raise {
		a.s.pub.Publish(api.SpoofDetected, nil, e)
	}
}

// Log answers GET /antispoof/log.
func (a *spoofer) Log(ctx context.Context, in *api.AntispoofLogRequest) (*api.AntispoofLog, error) {
	now := a.s.deps.Now()
	since, err := parseSince(in.Since, now)
	if err != nil {
		return nil, err
	}
	limit := in.Limit
	if limit <= 0 {
		limit = 50
	}
	a.mu.Lock()
	enabled := a.settings.Enabled
	a.mu.Unlock()
	out := &api.AntispoofLog{Enabled: enabled, Since: since.UTC().Format(time.RFC3339),
		Offenders: []api.AntispoofOffender{}, Entries: []api.AntispoofLogEntry{}}
	type okey struct{ iface, mac, src string }
	offenders := map[okey]*api.AntispoofOffender{}
	a.logMu.Lock()
	for i := len(a.log) - 1; i >= 0; i-- {
		e := a.log[i]
		t, _ := time.Parse(time.RFC3339, e.Time)
		if t.Before(since) {
			break
		}
		out.Total++
		if len(out.Entries) < limit {
			out.Entries = append(out.Entries, e)
		}
		k := okey{e.Iface, e.MAC, e.Src}
		o := offenders[k]
		if o == nil {
			o = &api.AntispoofOffender{Iface: e.Iface, MAC: e.MAC, Src: e.Src, Last: e.Time}
			offenders[k] = o
		}
		o.Count++
		if e.Kind == "arp" {
			o.ARP++
		} else {
			o.IP++
		}
	}
	a.logMu.Unlock()
	for _, o := range offenders {
		out.Offenders = append(out.Offenders, *o)
	}
	sort.Slice(out.Offenders, func(i, j int) bool {
		if out.Offenders[i].Count != out.Offenders[j].Count {
			return out.Offenders[i].Count > out.Offenders[j].Count
		}
		return out.Offenders[i].Last > out.Offenders[j].Last
	})
	return out, nil
}

// parseSince reads 30m, 2h, 1d, 45s, or YYYY-MM-DD HH:MM (local time);
// empty is one hour ago.
func parseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return now.Add(-time.Hour), nil
	}
	bad := apierr.Invalid("since", "since must be like 30m, 2h, 1d, 45s or YYYY-MM-DD HH:MM")
	if n := len(s); n >= 2 {
		var v int
		if _, err := fmt.Sscanf(s[:n-1], "%d", &v); err == nil && fmt.Sprint(v) == s[:n-1] && v >= 0 {
			unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[s[n-1]]
			if unit != 0 {
				return now.Add(-time.Duration(v) * unit), nil
			}
		}
	}
	for _, f := range []string{"2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", time.RFC3339, "2006-01-02"} {
		if t, err := time.ParseInLocation(f, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, bad
}

// macRules lists the bindings as MAC rules (GET /firewall): one per MAC and
// interface, with the registered client or null; network filters to
// clients in it.
func (s *Service) macRules(ctx context.Context, network string) []api.MACRule {
	a := s.spoof
	var filter netip.Prefix
	if network != "" {
		filter, _ = netip.ParsePrefix(network)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	type k struct{ mac, iface string }
	seen := map[k]bool{}
	out := []api.MACRule{}
	for _, b := range a.bindings {
		mac := strings.ToUpper(b.MAC.String())
		key := k{mac, b.Iface}
		if seen[key] {
			continue
		}
		seen[key] = true
		r := api.MACRule{MAC: mac, Iface: b.Iface}
		if c, ok := a.clients[mac]; ok {
			r.Client = &api.MACRuleClient{IP: c.IP, Hostname: c.Hostname, Comment: c.Comment}
		}
		if filter.IsValid() {
			if r.Client == nil {
				continue
			}
			ip, err := netip.ParseAddr(r.Client.IP)
			if err != nil || !filter.Contains(ip) {
				continue
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Iface != out[j].Iface {
			return out[i].Iface < out[j].Iface
		}
		return out[i].MAC < out[j].MAC
	})
	return out
}
