package v6

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// TestFastMatchesLibrary runs one conversation twice, on two servers with
// the same configuration: once through Handle (the fast path) and once
// through handleGeneral (the library's codec). Every answer must be
// byte-identical, with the same lease writes, events and routes.
func TestFastMatchesLibrary(t *testing.T) {
	fast, slow := newFixture(t), newFixture(t)
	zeroPrefix := func(d dhcpv6.DHCPv6) { // an IA_PD hint of length 0: "no prefix"
		ia := &dhcpv6.OptIAPD{IaId: [4]byte{0, 0, 0, 9}}
		ia.Options.Add(&dhcpv6.OptIAPrefix{})
		d.AddOption(ia)
	}
	withStatus := func(d dhcpv6.DHCPv6) { // a status code before the address
		ia := &dhcpv6.OptIANA{IaId: [4]byte{0, 0, 0, 7}}
		ia.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess})
		ia.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP("2001:db8:1::1001")})
		d.AddOption(ia)
	}
	other := dhcpv6.WithServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{9, 9, 9, 9, 9, 9}})
	pdHint := dhcpv6.WithIAPD([4]byte{0, 0, 0, 2}, &dhcpv6.OptIAPrefix{Prefix: mustNet("2001:db8:a000:600::/56")})
	steps := []struct {
		name string
		m    *dhcpv6.Message
		dt   time.Duration
	}{
		{"solicit", msg(t, dhcpv6.MessageTypeSolicit, macDyn, iana1(""), iapd1), 0},
		{"request", msg(t, dhcpv6.MessageTypeRequest, macDyn, withSID, iana1("2001:db8:1::1000"), iapd1), 0},
		{"renew cached", msg(t, dhcpv6.MessageTypeRenew, macDyn, withSID, iana1("2001:db8:1::1000"), iapd1), 30 * time.Second},
		{"renew written", msg(t, dhcpv6.MessageTypeRenew, macDyn, withSID, iana1("2001:db8:1::1000"), iapd1), 200 * time.Second},
		{"rebind moved hint", msg(t, dhcpv6.MessageTypeRebind, macDyn, iana1("2001:db8:1::2000"), iapd1), time.Second},
		{"rapid solicit fixed", msg(t, dhcpv6.MessageTypeSolicit, macFixed, dhcpv6.WithRapidCommit, iana1(""), iapd1), 0},
		{"solicit pd hint", msg(t, dhcpv6.MessageTypeSolicit, net.HardwareAddr{2, 0, 0, 0, 1, 3}, pdHint), 0},
		{"solicit zero-length prefix", msg(t, dhcpv6.MessageTypeSolicit, net.HardwareAddr{2, 0, 0, 0, 1, 4}, zeroPrefix), 0},
		{"status before address", msg(t, dhcpv6.MessageTypeRequest, net.HardwareAddr{2, 0, 0, 0, 1, 5}, withSID, withStatus), 0},
		{"request for another server", msg(t, dhcpv6.MessageTypeRequest, macDyn, other, iana1("")), 0},
		{"solicit with server id", msg(t, dhcpv6.MessageTypeSolicit, macDyn, withSID, iana1("")), 0},
		{"renew without server id", msg(t, dhcpv6.MessageTypeRenew, macDyn, iana1("")), 0},
	}
	for _, st := range steps {
		fast.now, slow.now = fast.now.Add(st.dt), slow.now.Add(st.dt)
		b := st.m.ToBytes()
		var r fastReq
		if !parseFast(b, &r) {
			t.Fatalf("%s: the fast path refused it; the comparison would prove nothing", st.name)
		}
		got := fast.s.Handle("v100", peer, b)
		want := slow.s.handleGeneral("v100", peer, b)
		if (got == nil) != (want == nil) {
			t.Fatalf("%s: fast answered %v, library %v", st.name, got != nil, want != nil)
		}
		if got == nil {
			continue
		}
		if !bytes.Equal(got.Resp, want.Resp) {
			g, _ := dhcpv6.MessageFromBytes(got.Resp)
			w, _ := dhcpv6.MessageFromBytes(want.Resp)
			t.Errorf("%s: answers differ\nfast:    %x\nlibrary: %x\nfast:    %v\nlibrary: %v", st.name, got.Resp, want.Resp, g, w)
		}
		if diff := cmp.Diff(want.Ops, got.Ops, eqIP); diff != "" {
			t.Errorf("%s: writes differ (-library +fast):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(want.Events, got.Events, eqIP); diff != "" {
			t.Errorf("%s: events differ (-library +fast):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(want.RouteAdd, got.RouteAdd, eqIP); diff != "" || got.Dst.String() != want.Dst.String() {
			t.Errorf("%s: routes or destination differ: %s %v %v", st.name, diff, got.Dst, want.Dst)
		}
	}
}

var eqIP = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

// FuzzFastParse: the fast reader must never accept a message the library
// refuses, and what it reads must be what the library reads.
func FuzzFastParse(f *testing.F) {
	m, _ := dhcpv6.NewMessage(dhcpv6.WithClientID(srvDUID), iana1("2001:db8:1::5"), iapd1, dhcpv6.WithRapidCommit)
	f.Add(m.ToBytes())
	m.MessageType = dhcpv6.MessageTypeRequest
	f.Add(m.ToBytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		var r fastReq
		if !parseFast(b, &r) {
			return
		}
		d, err := dhcpv6.FromBytes(b)
		if err != nil {
			return // the library refuses it: so will handleFast's DUID check or the answer
		}
		lm, ok := d.(*dhcpv6.Message)
		if !ok {
			t.Fatalf("fast path accepted a relay message")
		}
		na, pd := iaReqs(lm)
		if diff := cmp.Diff(na, r.na, cmp.Comparer(func(a, b iaReq) bool { return a == b })); diff != "" {
			t.Errorf("IA_NA read differently (-library +fast):\n%s", diff)
		}
		if diff := cmp.Diff(pd, r.pd, cmp.Comparer(func(a, b iaReq) bool { return a == b })); diff != "" {
			t.Errorf("IA_PD read differently (-library +fast):\n%s", diff)
		}
		if r.rapid != (lm.GetOneOption(dhcpv6.OptionRapidCommit) != nil) {
			t.Errorf("rapid commit read differently")
		}
	})
}

// TestReservationWithoutMACInDUID: a client whose DUID carries no MAC
// (DUID-EN here) is matched to its MAC reservation through its EUI-64
// link-local address.
func TestReservationWithoutMACInDUID(t *testing.T) {
	f := newFixture(t)
	en := &dhcpv6.DUIDEN{EnterpriseNumber: 9, EnterpriseIdentifier: []byte{1, 2, 3, 4}}
	m, err := dhcpv6.NewMessage(dhcpv6.WithClientID(en), iana1(""))
	if err != nil {
		t.Fatal(err)
	}
	m.MessageType = dhcpv6.MessageTypeSolicit
	eui := &net.UDPAddr{IP: net.ParseIP("fe80::ff:fe00:102"), Port: 546, Zone: "v100"} // from 02:00:00:00:01:02
	r := f.s.Handle("v100", eui, m.ToBytes())
	if r == nil {
		t.Fatal("no answer")
	}
	adv, _ := dhcpv6.MessageFromBytes(r.Resp)
	if got := addrOf(adv); got != "2001:db8:1::55" {
		t.Errorf("DUID-EN client on the reserved MAC's EUI-64 address got %s, want its fixed 2001:db8:1::55", got)
	}
	// From a privacy (non-EUI-64) address it is an ordinary dynamic client.
	r = f.s.Handle("v100", &net.UDPAddr{IP: net.ParseIP("fe80::1234:5678:9abc:def0"), Port: 546, Zone: "v100"}, m.ToBytes())
	adv, _ = dhcpv6.MessageFromBytes(r.Resp)
	if got := addrOf(adv); got == "2001:db8:1::55" {
		t.Errorf("a client with no MAC known got the reserved address")
	}
}
