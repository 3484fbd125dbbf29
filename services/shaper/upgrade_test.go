package shaper_test

import (
	"strings"
	"testing"

	"routerd.dev/shared/testenv"
)

// TestUpgradeDropsUploadIfb: the start's reconcile removes what earlier
// versions made to shape upload (the ifb link with the shaper's alias and
// the redirect filter to it on the interface's ingress qdisc) and nothing
// else: another ifb, another ingress filter and the ingress qdisc stay.
// The earlier table (download maps only, down6 an interval map, one
// element of no stored subscriber) becomes the current one: the element
// and down6 gone (no subscriber has IPv6), up4 and its rule there.
func TestUpgradeDropsUploadIfb(t *testing.T) {
	l := newLab(t)
	r := l.router
	testenv.Run(t, r, "ip", "link", "add", "shp-sub0", "type", "ifb")
	testenv.Run(t, r, "ip", "link", "set", "shp-sub0", "alias", "routerd:shaper ifb of sub0", "up")
	testenv.Run(t, r, "ip", "link", "add", "ifb9", "type", "ifb")
	testenv.Run(t, r, "tc", "qdisc", "add", "dev", "sub0", "ingress")
	testenv.Run(t, r, "tc", "filter", "add", "dev", "sub0", "parent", "ffff:", "prio", "0x7264", "protocol", "all",
		"u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "shp-sub0")
	testenv.Run(t, r, "tc", "filter", "add", "dev", "sub0", "parent", "ffff:", "prio", "5", "protocol", "all",
		"u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "ifb9")
	testenv.Run(t, r, "nft", "add table inet routerd_shaper; "+
		"add map inet routerd_shaper down4 { type ipv4_addr : classid; elements = { 10.77.0.99 : 1:64 } }; "+
		"add map inet routerd_shaper down6 { type ipv6_addr : classid; flags interval; }; "+
		"add chain inet routerd_shaper forward { type filter hook forward priority mangle; }; "+
		"add rule inet routerd_shaper forward meta priority set ip daddr map @down4")

	env := testenv.Start(t)
	start(t, env, r)

	links := testenv.Run(t, r, "ip", "-br", "link")
	if strings.Contains(links, "shp-sub0") || !strings.Contains(links, "ifb9") {
		t.Errorf("links after the reconcile (want shp-sub0 gone, ifb9 kept):\n%s", links)
	}
	filters := testenv.Run(t, r, "tc", "filter", "show", "dev", "sub0", "ingress")
	if strings.Contains(filters, "pref 29284") || !strings.Contains(filters, "pref 5") {
		t.Errorf("ingress filters after the reconcile (want the shaper's redirect gone, pref 5 kept):\n%s", filters)
	}
	if q := testenv.Run(t, r, "tc", "qdisc", "show", "dev", "sub0", "ingress"); !strings.Contains(q, "ingress") {
		t.Errorf("the ingress qdisc was removed:\n%s", q)
	}
	nft := testenv.Run(t, r, "nft", "list", "table", "inet", "routerd_shaper")
	if strings.Contains(nft, "10.77.0.99") || strings.Contains(nft, "down6") || !strings.Contains(nft, "map up4") || strings.Count(nft, "map @") != 2 {
		t.Errorf("the earlier table was not made the current one:\n%s", nft)
	}
}
