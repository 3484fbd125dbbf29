package nft_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"routerd.dev/services/firewall/nft"
	"routerd.dev/shared/testenv"
)

func TestSpoofTableLoads(t *testing.T) {
	ns := testenv.Netns(t)
	nl, _ := ns.Netlink()
	defer nl.Close()
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "s0"}, PeerName: "s0p"}); err != nil {
		t.Skip(err)
	}
	s, err := nft.OpenSpoof(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mac, _ := nft.ParseMAC("aa:bb:cc:00:00:05")
	st := nft.SpoofState{Ifaces: []string{"s0"}, LogGroup: 7, Exempt: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		Bindings: []nft.Binding{
			{Iface: "s0", MAC: mac, Prefix: netip.MustParsePrefix("10.0.0.5/32")},
			{Iface: "s0", MAC: mac, Prefix: netip.MustParsePrefix("2001:db8:a::5/128")},
			{Iface: "s0", MAC: mac, Prefix: netip.MustParsePrefix("2001:db8:100::/56")},
		}}
	if err := s.Rebuild(st); err != nil {
		t.Fatal(err)
	}
	out := testenv.Run(t, ns, "nft", "list", "table", "netdev", nft.SpoofTable)
	t.Log(out)
	for _, w := range []string{`"s0" . aa:bb:cc:00:00:05 . 10.0.0.5`, `"s0" . aa:bb:cc:00:00:05 . 2001:db8:100::`, `log prefix "ROUTER_SPOOF: " group 7`} {
		if !strings.Contains(out, w) {
			t.Errorf("lacks %s", w)
		}
	}
	if err := s.Change(func(b *nft.SpoofBatch) {
		b.Unbind(st.Bindings[0])
		b.Bind(nft.Binding{Iface: "s0", MAC: mac, Prefix: netip.MustParsePrefix("10.0.0.6/32")})
	}); err != nil {
		t.Fatal(err)
	}
	n4, n6, err := s.Count()
	if err != nil || n4 != 1 || n6 != 2 {
		t.Errorf("count %d %d %v", n4, n6, err)
	}
}
