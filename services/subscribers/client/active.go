package client

import (
	"context"
	"net/netip"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
)

func (b *Book) neighbours(ctx context.Context) []Neigh {
	if b.d.Neigh == nil {
		return nil
	}
	n, err := b.d.Neigh.Neighbours(ctx)
	if err != nil {
		b.d.Log.Warn("neighbour table not read", "err", err)
	}
	return n
}

// onlineCount counts the clients whose IPv4 address is an online neighbour.
func (b *Book) onlineCount(ctx context.Context) (int64, error) {
	live := map[string]bool{}
	for _, n := range b.neighbours(ctx) {
		if n.IP.Is4() && n.Online() {
			live[n.IP.String()] = true
		}
	}
	if len(live) == 0 {
		return 0, nil
	}
	pfx := b.k.ips()
	resp, err := b.d.St.Client().Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	var n int64
	for _, kv := range resp.Kvs {
		if live[strings.TrimPrefix(string(kv.Key), pfx)] {
			n++
		}
	}
	return n, nil
}

// leases reads every lease of one kind from dhcp (nil, logged, when dhcp
// does not answer).
func (b *Book) leases(ctx context.Context, kind string) []api.Lease {
	if b.d.Leases == nil {
		return nil
	}
	var out []api.Lease
	after := ""
	for {
		l, err := b.d.Leases.Leases(ctx, &api.LeaseFilter{Kind: kind, Limit: 1000, After: after})
		if err != nil {
			b.d.Log.Warn("leases not read", "kind", kind, "err", err)
			return out
		}
		out = append(out, l.Leases...)
		if l.Next == "" || len(l.Leases) == 0 {
			return out
		}
		after = l.Next
	}
}

func global6(a netip.Addr) bool { return a.Is6() && !a.IsLinkLocalUnicast() && !a.IsMulticast() }

// seen6 reads the IPv6 neighbours by MAC and the delegated prefixes by
// MAC (nothing when the service has no namespace or dhcp does not answer).
func (b *Book) seen6(ctx context.Context) (map[string][]Neigh, map[string][]string) {
	v6 := map[string][]Neigh{}
	for _, n := range b.neighbours(ctx) {
		if n.IP.Is6() && n.MAC != "" {
			v6[n.MAC] = append(v6[n.MAC], n)
		}
	}
	pd := map[string][]string{}
	for _, l := range b.leases(ctx, "v6pd") {
		if l.MAC != "" {
			m := strings.ToUpper(l.MAC)
			pd[m] = append(pd[m], netip.PrefixFrom(l.Addr, l.PrefixLen).String())
		}
	}
	return v6, pd
}

// Active is GET /clients/active.
func (b *Book) Active(ctx context.Context, in *api.ActiveQuery) (*api.ActiveAnswer, error) {
	clients, err := b.all(ctx)
	if err != nil {
		return nil, err
	}
	by4 := map[netip.Addr]*Neigh{}
	v6 := map[string][]Neigh{}
	ns := b.neighbours(ctx)
	for i := range ns {
		n := &ns[i]
		if n.IP.Is4() {
			if o := by4[n.IP]; o == nil || (!o.Online() && n.Online()) {
				by4[n.IP] = n
			}
		} else if n.MAC != "" {
			v6[n.MAC] = append(v6[n.MAC], *n)
		}
	}
	pd := map[string][]string{}
	for _, l := range b.leases(ctx, "v6pd") {
		if l.MAC != "" {
			pd[strings.ToUpper(l.MAC)] = append(pd[strings.ToUpper(l.MAC)], netip.PrefixFrom(l.Addr, l.PrefixLen).String())
		}
	}
	out := &api.ActiveAnswer{Clients: []api.ActiveEntry{}, DynamicLeases: []api.DynamicLease{}}
	macs, ips := map[string]bool{}, map[string]bool{}
	for _, c := range clients {
		macs[c.MAC], ips[c.IP] = true, true
		e := api.ActiveEntry{MAC: c.MAC, IP: c.IP, Hostname: c.Hostname, Iface: c.Iface, IPv6Actual: []string{}, IPv6All: []string{},
			Prefix6Delegated: pd[c.MAC]}
		if e.Prefix6Delegated == nil {
			e.Prefix6Delegated = []string{}
		}
		a, _ := netip.ParseAddr(c.IP)
		n := by4[a]
		e.Status = n.Status()
		if n != nil {
			e.NeighState, e.SeenMAC = n.State, n.MAC
			e.MACMismatch = n.MAC != "" && n.MAC != c.MAC
		}
		for _, n6 := range v6[c.MAC] {
			e.IPv6All = append(e.IPv6All, n6.IP.String())
			if global6(n6.IP) {
				e.IPv6Actual = append(e.IPv6Actual, n6.IP.String())
			}
		}
		out.Summary.Registered++
		switch e.Status {
		case "online":
			out.Summary.Online++
		case "recent":
			out.Summary.Recent++
		default:
			out.Summary.Offline++
		}
		if in.State == "" || in.State == e.Status {
			out.Clients = append(out.Clients, e)
		}
	}
	for _, l := range b.leases(ctx, "v4") {
		mac := strings.ToUpper(l.MAC)
		if macs[mac] || ips[l.Addr.String()] {
			continue
		}
		d := api.DynamicLease{IP: l.Addr.String(), State: l.State, MAC: mac, Hostname: l.Hostname, Ends: l.End.Local().Format(TimeLayout)}
		if n := by4[l.Addr]; n != nil {
			d.NeighState, d.Online = n.State, n.Online()
		}
		if l.State == "bound" {
			out.Summary.DynamicActiveLeases++
		}
		out.DynamicLeases = append(out.DynamicLeases, d)
	}
	out.Count = len(out.Clients)
	return out, nil
}

// pinned maps MAC to the prefix pinned to it by POST /pd/assign. dhcp
// keeps the pin (in the client's reservation, or in the configuration's
// pinned list), so it is asked (GET /pd's pinned list) rather than copied
// onto the client record, where it would go stale the moment someone
// pins or unpins; nothing, logged, when dhcp does not answer.
func (b *Book) pinned(ctx context.Context) map[string]string {
	out := map[string]string{}
	if b.d.Leases == nil {
		return out
	}
	l, err := b.d.Leases.Pinned(ctx)
	if err != nil {
		b.d.Log.Warn("pinned prefixes not read", "err", err)
		return out
	}
	for _, p := range l {
		if m, err := NormalizeMAC(p.MAC); err == nil {
			out[m] = p.Prefix6
		}
	}
	return out
}

// Clients6 is GET /clients6.
func (b *Book) Clients6(ctx context.Context, in *api.Clients6Query) (*api.Clients6Answer, error) {
	clients, err := b.all(ctx)
	if err != nil {
		return nil, err
	}
	reg := map[string]*api.Client{}
	for i := range clients {
		reg[clients[i].MAC] = &clients[i]
	}
	own := map[string]bool{}
	if b.d.Neigh != nil {
		if own, err = b.d.Neigh.OwnMACs(ctx); err != nil {
			return nil, err
		}
	}
	na, pd := map[string]string{}, map[string][]string{}
	for _, l := range b.leases(ctx, "v6na") {
		na[strings.ToUpper(l.MAC)] = l.Addr.String()
	}
	for _, l := range b.leases(ctx, "v6pd") {
		pd[strings.ToUpper(l.MAC)] = append(pd[strings.ToUpper(l.MAC)], netip.PrefixFrom(l.Addr, l.PrefixLen).String())
	}
	pinned := b.pinned(ctx)
	type group struct {
		e     *api.Client6Entry
		state string
	}
	groups := map[string]*group{}
	var order []string
	seen := map[string]bool{}
	for _, n := range b.neighbours(ctx) {
		if !n.IP.Is6() || n.MAC == "" || own[n.MAC] || (in.Iface != "" && n.Iface != in.Iface) {
			continue
		}
		g := groups[n.MAC]
		if g == nil {
			g = &group{e: &api.Client6Entry{MAC: n.MAC, Iface: n.Iface, IPv6All: []string{}, Prefix6Delegated: []string{}}}
			groups[n.MAC] = g
			order = append(order, n.MAC)
		}
		seen[n.MAC] = true
		e := g.e
		e.IPv6All = append(e.IPv6All, n.IP.String())
		if n.IP.IsLinkLocalUnicast() {
			e.LinkLocal = n.IP.String()
		} else if e.IPv6 == "" && global6(n.IP) {
			e.IPv6 = n.IP.String()
		}
		e.Router = e.Router || n.Router
		if n.Online() {
			e.Online = true
			g.state = n.State
		} else if g.state == "" || (g.state != "STALE" && n.State == "STALE") {
			if !e.Online {
				g.state = n.State
			}
		}
	}
	out := &api.Clients6Answer{Clients: []api.Client6Entry{}, OrphanDelegatedPrefixes: []string{}}
	sort.Strings(order)
	for _, mac := range order {
		g := groups[mac]
		e := g.e
		e.State = g.state
		c := reg[mac]
		_, leased := na[mac]
		if e.Router && !in.Routers && c == nil && !leased && len(pd[mac]) == 0 {
			continue
		}
		if c != nil {
			e.Registered, e.Hostname, e.IPv4, e.IPv6Reserved = true, c.Hostname, c.IP, c.IPv6
		}
		if a, ok := na[mac]; ok {
			e.Lease6 = ptr(a)
		}
		if p := pd[mac]; p != nil {
			e.Prefix6Delegated = p
		}
		if p, ok := pinned[mac]; ok {
			e.Prefix6Pinned = ptr(p)
		}
		out.Summary.Total++
		if e.Online {
			out.Summary.Online++
		}
		if e.Registered {
			out.Summary.Registered++
		}
		if len(e.Prefix6Delegated) > 0 || e.Prefix6Pinned != nil {
			out.Summary.WithPrefix++
		}
		out.Clients = append(out.Clients, *e)
	}
	for mac, ps := range pd {
		if !seen[mac] {
			out.OrphanDelegatedPrefixes = append(out.OrphanDelegatedPrefixes, ps...)
		}
	}
	sort.Strings(out.OrphanDelegatedPrefixes)
	out.Count = len(out.Clients)
	return out, nil
}

// IPs is GET /ips.
func (b *Book) IPs(ctx context.Context, in *api.IPsQuery) (*api.IPsAnswer, error) {
	nets, err := b.d.Nets.Networks(ctx, true)
	if err != nil {
		return nil, err
	}
	if in.Network != "" {
		want, err := parseCIDR(in.Network)
		if err != nil {
			return nil, apierr.Invalid("network", "invalid network %q", in.Network)
		}
		var keep []RouterNet
		for _, n := range nets {
			if n.Prefix == want {
				keep = append(keep, n)
			}
		}
		if len(keep) == 0 {
			return nil, apierr.NotFound("network %s is not on this router", want)
		}
		nets = keep
	}
	clients, err := b.all(ctx)
	if err != nil {
		return nil, err
	}
	ns := b.neighbours(ctx)
	out := &api.IPsAnswer{Networks: []api.IPNetwork{}}
	for _, n := range nets {
		if n.Prefix.Bits() > 30 {
			continue
		}
		used := map[netip.Addr]bool{}
		e := api.IPNetwork{Network: n.Prefix.String(), Iface: n.Iface, Gateway: n.Gateway.String(),
			TotalAssignable: int64(1)<<(32-n.Prefix.Bits()) - 3, Used: []api.IPUsed{}, NextFree: []string{}, UnregisteredSeen: []api.IPSeen{}}
		for _, c := range clients {
			a, err := netip.ParseAddr(c.IP)
			if err == nil && n.Prefix.Contains(a) {
				used[a] = true
				e.Used = append(e.Used, api.IPUsed{IP: c.IP, MAC: c.MAC, Hostname: c.Hostname})
			}
		}
		sort.Slice(e.Used, func(i, j int) bool {
			return netip.MustParseAddr(e.Used[i].IP).Less(netip.MustParseAddr(e.Used[j].IP))
		})
		e.UsedCount = int64(len(e.Used))
		e.FreeCount = e.TotalAssignable - e.UsedCount
		last := lastAddr(n.Prefix)
		for a := n.Prefix.Addr().Next(); a.IsValid() && a != last && len(e.NextFree) < 10; a = a.Next() {
			if a != n.Gateway && !used[a] {
				e.NextFree = append(e.NextFree, a.String())
			}
		}
		for _, nb := range ns {
			if nb.IP.Is4() && n.Prefix.Contains(nb.IP) && nb.MAC != "" && !used[nb.IP] && nb.IP != n.Gateway {
				e.UnregisteredSeen = append(e.UnregisteredSeen, api.IPSeen{IP: nb.IP.String(), MAC: nb.MAC, NeighState: nb.State})
			}
		}
		out.Networks = append(out.Networks, e)
	}
	out.Count = len(out.Networks)
	return out, nil
}
