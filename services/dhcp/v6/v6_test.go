package v6

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
)

var (
	t0       = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srvDUID  = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	peer     = &net.UDPAddr{IP: net.ParseIP("fe80::1:2"), Port: 546, Zone: "v100"}
	macDyn   = net.HardwareAddr{2, 0, 0, 0, 1, 1}
	macFixed = net.HardwareAddr{2, 0, 0, 0, 1, 2}
)

func testConfig() config.Config {
	return config.Config{
		Networks6:  []config.Network6{{Iface: "v100", Gateway: netip.MustParseAddr("2001:db8:1::1"), Prefix: netip.MustParsePrefix("2001:db8:1::/64")}},
		Lifetimes6: config.Lifetimes6{Valid: 600 * time.Second, Preferred: 300 * time.Second},
		PD: config.PD{Pool: netip.MustParsePrefix("2001:db8:a000::/48"), Len: 56, Reserve: 4,
			Slices: map[string]config.Slice{"v100": {Index: 4, Size: 4}},
			Pinned: []config.Pinned{{MAC: "02:00:00:00:01:02", Prefix: netip.MustParsePrefix("2001:db8:a000:100::/56")}}},
		DNS:      config.DNS{V6: []netip.Addr{netip.MustParseAddr("2001:db8::53")}, Domain: "isp.example"},
		Clients:  []config.Client{{MAC: "02:00:00:00:01:02", IP: netip.MustParseAddr("10.0.0.5"), IPv6: netip.MustParseAddr("2001:db8:1::55")}},
		Networks: []config.Network{{Iface: "v100", Gateway: netip.MustParseAddr("10.0.0.1"), Prefix: netip.MustParsePrefix("10.0.0.0/24")}},
	}.WithDefaults()
}

type fixture struct {
	s   *Server
	tab *lease.Table
	now time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg := testConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{tab: lease.NewTable(), now: t0}
	s, err := New(cfg, Deps{Table: f.tab, ServerID: srvDUID, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	return f
}

func msg(t *testing.T, typ dhcpv6.MessageType, mac net.HardwareAddr, mods ...dhcpv6.Modifier) *dhcpv6.Message {
	t.Helper()
	m, err := dhcpv6.NewMessage(append([]dhcpv6.Modifier{
		dhcpv6.WithClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac})}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.MessageType = typ
	return m
}

var withSID = dhcpv6.WithServerID(srvDUID)

func iana1(addr string) dhcpv6.Modifier {
	return func(d dhcpv6.DHCPv6) {
		ia := &dhcpv6.OptIANA{IaId: [4]byte{0, 0, 0, 1}}
		if addr != "" {
			ia.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP(addr)})
		}
		d.AddOption(ia)
	}
}

var iapd1 = dhcpv6.WithIAPD([4]byte{0, 0, 0, 2})

func (f *fixture) do(t *testing.T, m dhcpv6.DHCPv6) (*dhcpv6.Message, *Reply) {
	t.Helper()
	r := f.s.Handle("v100", peer, m.ToBytes())
	if r == nil {
		return nil, nil
	}
	got, err := dhcpv6.MessageFromBytes(r.Resp)
	if err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	return got, r
}

func addrOf(m *dhcpv6.Message) string {
	if ia := m.Options.OneIANA(); ia != nil {
		if a := ia.Options.OneAddress(); a != nil {
			return a.IPv6Addr.String()
		}
		if st := ia.Options.Status(); st != nil {
			return st.StatusCode.String()
		}
	}
	return ""
}

func prefixOf(m *dhcpv6.Message) string {
	if ia := m.Options.OneIAPD(); ia != nil {
		if ps := ia.Options.Prefixes(); len(ps) > 0 {
			return ps[0].Prefix.String()
		}
		if st := ia.Options.Status(); st != nil {
			return st.StatusCode.String()
		}
	}
	return ""
}

// TestSARR walks SOLICIT/ADVERTISE/REQUEST/REPLY, RENEW, REBIND, RELEASE.
func TestSARR(t *testing.T) {
	f := newFixture(t)
	adv, r := f.do(t, msg(t, dhcpv6.MessageTypeSolicit, macDyn, iana1(""), iapd1))
	if adv == nil || adv.MessageType != dhcpv6.MessageTypeAdvertise || len(r.Ops) != 0 {
		t.Fatalf("SOLICIT answered %v ops %d", adv, len(r.Ops))
	}
	want := map[string]string{"addr": "2001:db8:1::1000", "prefix": "2001:db8:a000:400::/56",
		"dns": "[2001:db8::53]", "domain": "[isp.example]", "sid": srvDUID.String(), "dst": "[fe80::1:2%v100]:546"}
	got := map[string]string{"addr": addrOf(adv), "prefix": prefixOf(adv), "dns": sprint(adv.Options.DNS()),
		"domain": sprintLabels(adv), "sid": adv.Options.ServerID().String(), "dst": r.Dst.String()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ADVERTISE (-want +got):\n%s", diff)
	}
	ia := adv.Options.OneIANA().Options.OneAddress()
	if ia.ValidLifetime != 600*time.Second || ia.PreferredLifetime != 300*time.Second {
		t.Errorf("lifetimes valid %v preferred %v", ia.ValidLifetime, ia.PreferredLifetime)
	}

	rep, r := f.do(t, msg(t, dhcpv6.MessageTypeRequest, macDyn, withSID, iana1("2001:db8:1::1000"), iapd1))
	if rep == nil || rep.MessageType != dhcpv6.MessageTypeReply || addrOf(rep) != "2001:db8:1::1000" || prefixOf(rep) != "2001:db8:a000:400::/56" {
		t.Fatalf("REQUEST answered %v", rep)
	}
	if len(r.Ops) != 2 || len(r.RouteAdd) != 1 || r.RouteAdd[0].Via.String() != "fe80::1:2" {
		t.Fatalf("REQUEST ops %d routes %+v, want 2 writes and a route via the client", len(r.Ops), r.RouteAdd)
	}
	// Another server's REQUEST is ignored.
	other := dhcpv6.WithServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{9, 9, 9, 9, 9, 9}})
	if got, _ := f.do(t, msg(t, dhcpv6.MessageTypeRequest, macDyn, other, iana1(""))); got != nil {
		t.Errorf("REQUEST for another server answered")
	}

	// A renewal soon after the write is answered from the cache (valid
	// 600 s, threshold 0.25: under 150 s old): what is left, no write.
	f.now = f.now.Add(100 * time.Second)
	rep, r = f.do(t, msg(t, dhcpv6.MessageTypeRenew, macDyn, withSID, iana1("2001:db8:1::1000"), iapd1))
	if rep == nil || addrOf(rep) != "2001:db8:1::1000" || prefixOf(rep) != "2001:db8:a000:400::/56" || len(r.Ops) != 0 || len(r.Events) != 0 || len(r.RouteAdd) != 0 {
		t.Fatalf("cached RENEW answered %v with %d ops %d events", rep, len(r.Ops), len(r.Events))
	}
	a := rep.Options.OneIANA().Options.OneAddress()
	pd := rep.Options.OneIAPD().Options.Prefixes()[0]
	if a.ValidLifetime != 500*time.Second || a.PreferredLifetime != 200*time.Second || pd.ValidLifetime != 500*time.Second {
		t.Errorf("cached RENEW lifetimes valid %v preferred %v (pd valid %v), want what is left: 500s 200s", a.ValidLifetime, a.PreferredLifetime, pd.ValidLifetime)
	}

	for _, typ := range []dhcpv6.MessageType{dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind} {
		f.now = f.now.Add(200 * time.Second) // past the cache threshold: a write
		mods := []dhcpv6.Modifier{iana1("2001:db8:1::1000"), iapd1}
		if typ == dhcpv6.MessageTypeRenew {
			mods = append(mods, withSID)
		}
		rep, r = f.do(t, msg(t, typ, macDyn, mods...))
		if rep == nil || addrOf(rep) != "2001:db8:1::1000" || prefixOf(rep) != "2001:db8:a000:400::/56" {
			t.Fatalf("%v answered %v", typ, rep)
		}
		if r.Events[0].Kind != "lease_renewed" {
			t.Errorf("%v event %q", typ, r.Events[0].Kind)
		}
	}

	rel := msg(t, dhcpv6.MessageTypeRelease, macDyn, withSID, iana1("2001:db8:1::1000"),
		dhcpv6.WithIAPD([4]byte{0, 0, 0, 2}, &dhcpv6.OptIAPrefix{Prefix: mustNet("2001:db8:a000:400::/56")}))
	rep, r = f.do(t, rel)
	if rep == nil || rep.Options.Status() == nil || rep.Options.Status().StatusCode != iana.StatusSuccess {
		t.Fatalf("RELEASE answered %v", rep)
	}
	if len(r.Ops) != 2 || len(r.RouteDel) != 1 || f.tab.Len() != 0 {
		t.Errorf("RELEASE ops %d route dels %v table %d", len(r.Ops), r.RouteDel, f.tab.Len())
	}
}

func TestRapidCommitFixedAndPinned(t *testing.T) {
	f := newFixture(t)
	rep, r := f.do(t, msg(t, dhcpv6.MessageTypeSolicit, macFixed, iana1(""), iapd1, dhcpv6.WithRapidCommit))
	if rep == nil || rep.MessageType != dhcpv6.MessageTypeReply || rep.GetOneOption(dhcpv6.OptionRapidCommit) == nil {
		t.Fatalf("rapid-commit SOLICIT answered %v", rep)
	}
	if got, want := addrOf(rep)+" "+prefixOf(rep), "2001:db8:1::55 2001:db8:a000:100::/56"; got != want {
		t.Errorf("reserved client got %q, want %q", got, want)
	}
	if len(r.Ops) != 2 {
		t.Errorf("rapid commit wrote %d leases, want 2", len(r.Ops))
	}
}

func TestExhaustionDeclineConfirmInfo(t *testing.T) {
	f := newFixture(t)
	var got []string
	for i := range 5 {
		rep, _ := f.do(t, msg(t, dhcpv6.MessageTypeSolicit, net.HardwareAddr{2, 5, 0, 0, 0, byte(i)}, iapd1, dhcpv6.WithRapidCommit))
		got = append(got, prefixOf(rep))
	}
	want := []string{"2001:db8:a000:400::/56", "2001:db8:a000:500::/56", "2001:db8:a000:600::/56", "2001:db8:a000:700::/56", "NoPrefixAvail"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prefixes from a 4-prefix slice (-want +got):\n%s", diff)
	}

	f.do(t, msg(t, dhcpv6.MessageTypeSolicit, macDyn, iana1(""), dhcpv6.WithRapidCommit))
	rep, r := f.do(t, msg(t, dhcpv6.MessageTypeDecline, macDyn, withSID, iana1("2001:db8:1::1000")))
	if rep == nil || len(r.Ops) != 1 || r.Ops[0].Lease.State != lease.Declined {
		t.Fatalf("DECLINE answered %v ops %+v", rep, r)
	}
	rep, _ = f.do(t, msg(t, dhcpv6.MessageTypeSolicit, macDyn, iana1(""), dhcpv6.WithRapidCommit))
	if addrOf(rep) == "2001:db8:1::1000" {
		t.Errorf("declined address handed out again")
	}

	rep, _ = f.do(t, msg(t, dhcpv6.MessageTypeConfirm, macDyn, iana1("2001:db8:9::1")))
	if rep == nil || rep.Options.Status().StatusCode != iana.StatusNotOnLink {
		t.Errorf("CONFIRM off-link answered %v", rep)
	}
	rep, _ = f.do(t, msg(t, dhcpv6.MessageTypeConfirm, macDyn, iana1("2001:db8:1::1001")))
	if rep == nil || rep.Options.Status().StatusCode != iana.StatusSuccess {
		t.Errorf("CONFIRM on-link answered %v", rep)
	}
	rep, r = f.do(t, msg(t, dhcpv6.MessageTypeInformationRequest, macDyn))
	if rep == nil || sprint(rep.Options.DNS()) != "[2001:db8::53]" || len(r.Ops) != 0 {
		t.Errorf("INFORMATION-REQUEST answered %v", rep)
	}
}

func TestRelayed(t *testing.T) {
	f := newFixture(t)
	inner := msg(t, dhcpv6.MessageTypeSolicit, macDyn, iana1(""), dhcpv6.WithRapidCommit)
	relay, err := dhcpv6.EncapsulateRelay(inner, dhcpv6.MessageTypeRelayForward, net.ParseIP("2001:db8:1::2"), net.ParseIP("fe80::99"))
	if err != nil {
		t.Fatal(err)
	}
	r := f.s.Handle("v100", &net.UDPAddr{IP: net.ParseIP("2001:db8:1::2"), Port: 547}, relay.ToBytes())
	if r == nil {
		t.Fatal("relayed SOLICIT not answered")
	}
	out, err := dhcpv6.FromBytes(r.Resp)
	if err != nil || out.Type() != dhcpv6.MessageTypeRelayReply || r.Dst.Port != 547 {
		t.Fatalf("relayed answer %v %v to %v", out, err, r.Dst)
	}
	if r.Ops[0].Lease.Via.String() != "fe80::99" {
		t.Errorf("via %v, want the relay's peer address", r.Ops[0].Lease.Via)
	}
}

func TestReclaim(t *testing.T) {
	f := newFixture(t)
	f.do(t, msg(t, dhcpv6.MessageTypeSolicit, macDyn, iana1(""), iapd1, dhcpv6.WithRapidCommit))
	f.now = f.now.Add(601 * time.Second)
	ops, events, dels := f.s.Reclaim(f.now)
	if len(ops) != 2 || len(events) != 2 || len(dels) != 1 || f.tab.Len() != 0 {
		t.Errorf("reclaim: ops %d events %d route dels %d left %d", len(ops), len(events), len(dels), f.tab.Len())
	}
}

func FuzzHandle(f *testing.F) {
	s := msg(&testing.T{}, dhcpv6.MessageTypeSolicit, macDyn, iana1(""), iapd1)
	f.Add(s.ToBytes())
	f.Add([]byte{1, 0, 0, 0})
	f.Add([]byte{12, 0, 0, 0})
	cfg := testConfig()
	s6, _ := New(cfg, Deps{Table: lease.NewTable(), ServerID: srvDUID, Now: func() time.Time { return t0 }})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r := s6.Handle("v100", peer, b); r != nil {
			if _, err := dhcpv6.FromBytes(r.Resp); err != nil {
				t.Fatalf("answer does not parse: %v", err)
			}
		}
	})
}

func TestTruncated(t *testing.T) {
	f := newFixture(t)
	b := msg(t, dhcpv6.MessageTypeSolicit, macDyn, iana1(""), iapd1, dhcpv6.WithRapidCommit).ToBytes()
	for n := 0; n < len(b); n++ {
		f.s.Handle("v100", peer, b[:n]) // must not panic
	}
}

func mustNet(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }

func sprint(ips []net.IP) string {
	s := "["
	for i, ip := range ips {
		if i > 0 {
			s += " "
		}
		s += ip.String()
	}
	return s + "]"
}

func sprintLabels(m *dhcpv6.Message) string {
	l := m.Options.DomainSearchList()
	if l == nil {
		return ""
	}
	return sprintStrings(l.Labels)
}

func sprintStrings(ss []string) string {
	s := "["
	for i, x := range ss {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s + "]"
}

// TestElementReservation: a MAC reservation with a fixed IPv6 address and
// a pinned prefix, added, changed and removed in place (SetClient), is
// what the next SOLICIT gets.
func TestElementReservation(t *testing.T) {
	f := newFixture(t)
	mac := net.HardwareAddr{2, 0, 0, 0, 7, 7}
	solicit := func() string {
		t.Helper()
		rep, _ := f.do(t, msg(t, dhcpv6.MessageTypeSolicit, mac, iana1(""), iapd1))
		if rep == nil {
			t.Fatal("no ADVERTISE")
		}
		return addrOf(rep) + " " + prefixOf(rep)
	}
	dynamic := solicit()
	c := config.Client{MAC: mac.String(), IP: netip.MustParseAddr("10.0.0.77"), IPv6: netip.MustParseAddr("2001:db8:1::77"),
		Prefix6: netip.MustParsePrefix("2001:db8:a000:200::/56")}
	f.s.SetClient(nil, &c)
	if got, want := solicit(), "2001:db8:1::77 2001:db8:a000:200::/56"; got != want {
		t.Errorf("added reservation: %q, want %q", got, want)
	}
	// Offers are held for the client (OfferHold): let them lapse, as a
	// lease of the old reservation lasts until it expires.
	expire := func() { f.now = f.now.Add(time.Hour); f.s.Reclaim(f.now) }
	c2 := c
	c2.IPv6, c2.Prefix6 = netip.MustParseAddr("2001:db8:1::78"), netip.Prefix{}
	f.s.SetClient(&c, &c2)
	expire()
	if got := solicit(); !strings.HasPrefix(got, "2001:db8:1::78 ") || strings.Contains(got, "a000:200::") {
		t.Errorf("changed reservation: %q", got)
	}
	f.s.SetClient(&c2, nil)
	expire()
	if got := solicit(); strings.HasPrefix(got, "2001:db8:1::78 ") {
		t.Errorf("removed reservation still served: %q (dynamic was %q)", got, dynamic)
	}
}
