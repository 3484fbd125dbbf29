// Package client keeps the MAC clients of the subscribers service: one etcd
// key per client plus index keys (IPv4, IPv6, hostname, plan, network), so
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
//	index/plan/<plan>/<MAC>         "" (the plan's users: counted, listed, and checked empty by DELETE /plans in its own transaction)
//	index/net/<network with _>/<MAC> "" (per_network counts of GET /status)
package client

import (
	"fmt"
	"net/netip"
	"strings"

	"routerd.dev/services/subscribers/plan"
	"routerd.dev/shared/store"
)

type keys struct{ st *store.Store }

func (k keys) client(mac string) string  { return k.st.Key("clients", mac) }
func (k keys) clients() string           { return k.st.Key("clients") + "/" }
func (k keys) ip(ip string) string       { return k.st.Key("index", "ip", ip) }
func (k keys) ips() string               { return k.st.Key("index", "ip") + "/" }
func (k keys) ipv6(ip string) string     { return k.st.Key("index", "ipv6", ip) }
func (k keys) host(h string) string      { return k.st.Key("index", "host", strings.ToLower(h)) }
func (k keys) plan(p, mac string) string { return plan.UserKey(k.st, p, mac) }
func (k keys) net(n, mac string) string  { return k.nets(n) + mac }
func (k keys) nets(n string) string {
	return k.st.Key("index", "net", strings.ReplaceAll(n, "/", "_")) + "/"
}
func (k keys) planOf(p string) string        { return k.st.Key("plans", p) }
func (k keys) macOf(clientKey string) string { return strings.TrimPrefix(clientKey, k.clients()) }

// macSeparators are the separators NormalizeMAC drops: one Replacer for
// every call (building one per call cost more than the rest of a
// restore's check of 100,000 clients).
var macSeparators = strings.NewReplacer(":", "", "-", "", ".", "")

// NormalizeMAC accepts aa:bb:cc:dd:ee:ff, aa-bb-cc-dd-ee-ff, aabbccddeeff
// and aabb.ccdd.eeff in any case and returns AA:BB:CC:DD:EE:FF.
func NormalizeMAC(s string) (string, error) {
	if canonicalMAC(s) {
		return s, nil
	}
	h := macSeparators.Replace(strings.TrimSpace(s))
	if len(h) != 12 {
		return "", fmt.Errorf("invalid MAC %q", s)
	}
	var b strings.Builder
	for i := 0; i < 12; i++ {
		c := h[i]
		switch {
		case c >= '0' && c <= '9', c >= 'A' && c <= 'F':
		case c >= 'a' && c <= 'f':
			c -= 'a' - 'A'
		default:
			return "", fmt.Errorf("invalid MAC %q", s)
		}
		if i > 0 && i%2 == 0 {
			b.WriteByte(':')
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// canonicalMAC reports whether s is already AA:BB:CC:DD:EE:FF (upper-case
// hex, colons): NormalizeMAC returns it as it is, without building it
// again (an import normalises every MAC of a document that holds them
// so: 100,000 of them, twice).
func canonicalMAC(s string) bool {
	if len(s) != 17 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i%3 == 2 {
			if c != ':' {
				return false
			}
		} else if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// canon6 is the canonical text of an IPv6 address (the index key).
func canon6(s string) (string, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() {
		return "", false
	}
	return a.String(), true
}
