// Package client keeps the MAC clients of the subscribers service: one etcd
// key per client plus index keys (IPv4, IPv6, hostname, plan and network), so
// that adding, changing or deleting one client is one transaction whatever
// the number of clients, and a duplicate address or hostname is refused by
// etcd itself (the index key must be absent) rather than by a read of every
// client. Each client's effects (its DHCP reservation, its shaping, its
// suspension block) are asked of the services that own that kernel state,
// after the record is stored; a change whose effects fail half way is undone
// whole, the stored record included.
//
// Keys, under /router/subscribers/:
//
//	clients/<MAC>                   the client (api.Client)
//	index/ip/<IPv4>                 its MAC
//	index/ipv6/<IPv6>               its MAC
//	index/host/<hostname, lower>    its MAC
//	index/use/<plan>/<network with _>/<MAC> "" (plan.UseKey, ~ for none: the plan's users, counted,
//	                                 listed and checked empty by DELETE /plans in its own transaction;
//	                                 per_network counts of GET /status)
package client

import (
	"net/netip"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/subscribers/plan"
	"routerd.dev/shared/mac"
	"routerd.dev/shared/store"
)

type keys struct{ st *store.Store }

func (k keys) client(mac string) string { return k.st.Key("clients", mac) }
func (k keys) clients() string          { return k.st.Key("clients") + "/" }
func (k keys) ip(ip string) string      { return k.st.Key("index", "ip", ip) }
func (k keys) ips() string              { return k.st.Key("index", "ip") + "/" }
func (k keys) ipv6(ip string) string    { return k.st.Key("index", "ipv6", ip) }
func (k keys) host(h string) string     { return k.st.Key("index", "host", strings.ToLower(h)) }
func (k keys) use(c *api.Client) string {
	return plan.UseKey(k.st, str(c.Plan), str(c.Network), c.MAC)
}
func (k keys) usesOf(p string) string        { return k.st.Key("index", "use", p) + "/" }
func (k keys) planOf(p string) string        { return k.st.Key("plans", p) }
func (k keys) macOf(clientKey string) string { return strings.TrimPrefix(clientKey, k.clients()) }

// NormalizeMAC returns the stored form of a MAC, AA:BB:CC:DD:EE:FF
// (shared/mac: the dhcp service's reservations key by the same form).
func NormalizeMAC(s string) (string, error) { return mac.Normalize(s) }

// canon6 is the canonical text of an IPv6 address (the index key).
func canon6(s string) (string, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() {
		return "", false
	}
	return a.String(), true
}
