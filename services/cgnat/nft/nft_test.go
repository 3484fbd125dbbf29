package nft

import (
	"net/netip"
	"strings"
	"testing"

	"routerd.dev/shared/testenv"
)

func TestTableRoundTrip(t *testing.T) {
	ns := testenv.Netns(t)
	k := New(ns.FD(), ns.Path())
	el := Element{Private: netip.MustParseAddr("10.0.0.5"), Public: netip.MustParseAddr("203.0.113.1"), PortStart: 1024, PortEnd: 3071}
	rules := []Rule{
		{Chain: ChainPost, ID: "cgnat exempt", Exprs: Join(OifName("up0"), k.ExemptLookup(), Accept())},
		{Chain: ChainPost, ID: "cgnat tcp", Exprs: Join(OifName("up0"), L4(6), k.SNATMap())},
		{Chain: ChainPost, ID: "nat up1", Exprs: Join(OifName("up1"), SNATRange(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.4")))},
		{Chain: ChainPre, ID: "pf tcp any 80", Exprs: Join(DaddrLocal(), L4(6), Dport(80), DNAT(netip.MustParseAddr("10.0.0.9"), 8080))},
		{Chain: ChainFwd, ID: "pf tcp any 80", Exprs: Join(Daddr(netip.MustParsePrefix("10.0.0.9/32")), L4(6), Dport(8080), CtDNAT(), Accept())},
	}
	ex := []netip.Prefix{netip.MustParsePrefix("10.99.0.0/16")}
	if err := k.Create(rules, ex, []Element{el}); err != nil {
		t.Fatal(err)
	}
	out := testenv.Run(t, ns, "nft", "list", "ruleset")
	t.Log(out)
	for _, want := range []string{`oifname "up0" ip saddr @cg_exempt accept`, "snat to 198.51.100.1-198.51.100.4",
		"dnat to 10.0.0.9:8080", "ct status dnat accept", "10.99.0.0/16"} {
		if !strings.Contains(out, want) {
			t.Errorf("ruleset lacks %q", want)
		}
	}
	st, err := k.Read()
	if err != nil || !st.Exists {
		t.Fatalf("read: %v %+v", err, st)
	}
	if got := st.Elems[el.Private]; got != el {
		t.Errorf("element read back %+v", got)
	}
	if len(st.Rules[ChainPost]) != 3 || st.Rules[ChainPost][1].ID != "cgnat tcp" {
		t.Errorf("rules %+v", st.Rules)
	}
	el2 := el
	el2.PortStart, el2.PortEnd = 3072, 5119
	if err := k.Apply(Batch{DelElems: []netip.Addr{el.Private}, AddElems: []Element{el2}, DelRules: []Handle{{ChainPost, st.Rules[ChainPost][2].Handle}}}); err != nil {
		t.Fatal(err)
	}
	st, _ = k.Read()
	if st.Elems[el.Private] != el2 || len(st.Rules[ChainPost]) != 2 {
		t.Errorf("after apply: %+v", st)
	}
	if live := k.Live(ChainPost); len(live) != 2 || !strings.Contains(live[1], `meta l4proto tcp snat ip to ip saddr map @cg_subs comment "cgnat tcp"`) {
		t.Errorf("live = %q", live)
	}
}
