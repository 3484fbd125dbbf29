package v4

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
)

var (
	macDyn   = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macFixed = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	t0       = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func testConfig() config.Config {
	return config.Config{
		Networks: []config.Network{{
			Iface: "v100", Gateway: netip.MustParseAddr("10.0.0.1"), Prefix: netip.MustParsePrefix("10.0.0.0/24"),
			PoolStart: netip.MustParseAddr("10.0.0.100"), PoolEnd: netip.MustParseAddr("10.0.0.102"),
		}},
		DNS: config.DNS{
			V4: []netip.Addr{netip.MustParseAddr("9.9.9.9")}, Domain: "isp.example",
		},
		Clients:  []config.Client{{MAC: "02-00-00-00-00-02", IP: netip.MustParseAddr("10.0.0.50"), Hostname: "fixed1"}},
		Services: []config.Service{{ID: "svc_00000001", OLT: "OLT1", PON: "0/1/0", ONTID: 5, IPv4: netip.MustParseAddr("10.0.0.60")}},
		Option82: config.Option82{Enabled: true},
	}.WithDefaults()
}

type fixture struct {
	s   *Server
	tab *lease.Table
	now time.Time
}

func newFixture(t *testing.T, cfg config.Config) *fixture {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{tab: lease.NewTable(), now: t0}
	s, err := New(cfg, Deps{Table: f.tab, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	return f
}

func pkt(t *testing.T, typ dhcpv4.MessageType, mac net.HardwareAddr, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	p, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithMessageType(typ), dhcpv4.WithHwAddr(mac)}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	// Round-trip through bytes so the server sees what the wire carries.
	p, err = dhcpv4.FromBytes(p.ToBytes())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) do(t *testing.T, req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, *Reply) {
	t.Helper()
	r := f.s.Handle("v100", req.ToBytes())
	if r == nil || r.Resp == nil {
		return nil, r
	}
	got, err := dhcpv4.FromBytes(r.Resp)
	if err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	return got, r
}

var sid = dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 0, 0, 1)))

func reqIP(s string) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(s)))
}

// TestDORA walks a dynamic client through selecting, renewing, rebinding,
// init-reboot and release, checking the answer's type, address and options.
func TestDORA(t *testing.T) {
	f := newFixture(t, testConfig())
	offer, r := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, macDyn))
	if offer == nil || offer.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("DISCOVER answered %v", offer)
	}
	if len(r.Ops) != 0 {
		t.Errorf("an OFFER wrote %d leases; offers are memory only", len(r.Ops))
	}
	if got, want := offer.YourIPAddr.String(), "10.0.0.100"; got != want {
		t.Errorf("offered %s, want %s", got, want)
	}
	want := map[string]string{
		"mask": "ffffff00", "router": "[10.0.0.1]", "bcast": "10.0.0.255", "dns": "[9.9.9.9]",
		"domain": "isp.example", "lease": "1h0m0s", "sid": "10.0.0.1",
	}
	got := map[string]string{
		"mask": offer.SubnetMask().String(), "router": sprint(offer.Router()), "bcast": offer.BroadcastAddress().String(),
		"dns": sprint(offer.DNS()), "domain": offer.DomainName(), "lease": offer.IPAddressLeaseTime(0).String(),
		"sid": offer.ServerIdentifier().String(),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OFFER options (-want +got):\n%s", diff)
	}
	if got, want := r.Dst.String(), "255.255.255.255:68"; got != want {
		t.Errorf("OFFER sent to %s, want %s", got, want)
	}

	ack, r := f.do(t, pkt(t, dhcpv4.MessageTypeRequest, macDyn, sid, reqIP("10.0.0.100")))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || ack.YourIPAddr.String() != "10.0.0.100" {
		t.Fatalf("REQUEST(selecting) answered %v", ack)
	}
	if len(r.Ops) != 1 || r.Ops[0].Lease == nil || r.Ops[0].Lease.State != lease.Bound {
		t.Fatalf("ACK must carry one bound lease write, got %+v", r.Ops)
	}
	if r.Events[0].Kind != "lease_granted" {
		t.Errorf("event %q, want lease_granted", r.Events[0].Kind)
	}

	// Re-requested within a quarter of the lease time: answered from the
	// durable lease with the time left, without a write.
	f.now = f.now.Add(5 * time.Minute)
	ack, r = f.do(t, pkt(t, dhcpv4.MessageTypeRequest, macDyn, sid, reqIP("10.0.0.100")))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || len(r.Ops) != 0 || len(r.Events) != 0 {
		t.Fatalf("cached REQUEST answered %v with ops %+v events %+v, want an ACK and no write", ack, r.Ops, r.Events)
	}
	if got := ack.IPAddressLeaseTime(0); got != 55*time.Minute {
		t.Errorf("cached ACK lease time %v, want the 55m left", got)
	}

	f.now = f.now.Add(25 * time.Minute)
	renew := pkt(t, dhcpv4.MessageTypeRequest, macDyn, dhcpv4.WithClientIP(net.IPv4(10, 0, 0, 100)))
	ack, r = f.do(t, renew)
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || ack.YourIPAddr.String() != "10.0.0.100" {
		t.Fatalf("REQUEST(renewing) answered %v", ack)
	}
	if r.Events[0].Kind != "lease_renewed" || !r.Ops[0].Lease.End.Equal(f.now.Add(time.Hour)) {
		t.Errorf("renewal event %q end %v", r.Events[0].Kind, r.Ops[0].Lease.End)
	}
	if got, want := r.Dst.String(), "10.0.0.100:68"; got != want {
		t.Errorf("renewal ACK sent to %s, want %s (unicast to ciaddr)", got, want)
	}

	ack, _ = f.do(t, pkt(t, dhcpv4.MessageTypeRequest, macDyn, reqIP("10.0.0.100"))) // init-reboot
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("REQUEST(init-reboot) answered %v", ack)
	}

	// Another client may not have it while it is bound.
	nak, _ := f.do(t, pkt(t, dhcpv4.MessageTypeRequest, net.HardwareAddr{2, 0, 0, 0, 0, 9}, reqIP("10.0.0.100")))
	if nak == nil || nak.MessageType() != dhcpv4.MessageTypeNak {
		t.Fatalf("init-reboot for another client's address answered %v, want NAK", nak)
	}

	_, r = f.do(t, pkt(t, dhcpv4.MessageTypeRelease, macDyn, dhcpv4.WithClientIP(net.IPv4(10, 0, 0, 100)), sid))
	if r == nil || len(r.Ops) != 1 || r.Ops[0].Lease != nil || r.Events[0].Kind != "lease_released" {
		t.Fatalf("RELEASE gave %+v, want one delete and lease_released", r)
	}
	if f.tab.Len() != 0 {
		t.Errorf("table holds %d leases after release", f.tab.Len())
	}
}

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

func TestNAK(t *testing.T) {
	f := newFixture(t, testConfig())
	for _, tc := range []struct {
		name string
		req  *dhcpv4.DHCPv4
	}{
		{"wrong network (init-reboot)", pkt(t, dhcpv4.MessageTypeRequest, macDyn, reqIP("192.168.1.5"))},
		{"outside pool", pkt(t, dhcpv4.MessageTypeRequest, macDyn, reqIP("10.0.0.7"))},
		{"another client's reservation", pkt(t, dhcpv4.MessageTypeRequest, macDyn, reqIP("10.0.0.50"))},
		{"reserved client asks for a pool address", pkt(t, dhcpv4.MessageTypeRequest, macFixed, sid, reqIP("10.0.0.100"))},
		{"renewing an address never leased", pkt(t, dhcpv4.MessageTypeRequest, macFixed, dhcpv4.WithClientIP(net.IPv4(10, 0, 0, 101)))},
	} {
		got, _ := f.do(t, tc.req)
		if got == nil || got.MessageType() != dhcpv4.MessageTypeNak {
			t.Errorf("%s: answered %v, want NAK", tc.name, got)
			continue
		}
		if got.YourIPAddr != nil && !got.YourIPAddr.IsUnspecified() {
			t.Errorf("%s: NAK carries yiaddr %v", tc.name, got.YourIPAddr)
		}
	}
}

func TestSelectingOtherServer(t *testing.T) {
	f := newFixture(t, testConfig())
	f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, macDyn))
	got, _ := f.do(t, pkt(t, dhcpv4.MessageTypeRequest, macDyn, dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 0, 0, 2))), reqIP("10.0.0.100")))
	if got != nil {
		t.Fatalf("REQUEST for another server answered %v", got)
	}
	if f.tab.Len() != 0 {
		t.Errorf("offer kept after the client chose another server")
	}
}

func TestReservationAndHostname(t *testing.T) {
	f := newFixture(t, testConfig())
	offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, macFixed))
	if offer == nil || offer.YourIPAddr.String() != "10.0.0.50" || offer.HostName() != "fixed1" {
		t.Fatalf("reserved client offered %v", offer)
	}
	ack, r := f.do(t, pkt(t, dhcpv4.MessageTypeRequest, macFixed, sid, reqIP("10.0.0.50")))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || r.Ops[0].Lease.Hostname != "fixed1" {
		t.Fatalf("reserved client REQUEST answered %v", ack)
	}
}

func TestPoolExhaustionAndDecline(t *testing.T) {
	f := newFixture(t, testConfig())
	var got []string
	for i := range 4 {
		offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, net.HardwareAddr{2, 1, 0, 0, 0, byte(i)}))
		if offer == nil {
			got = append(got, "none")
			continue
		}
		got = append(got, offer.YourIPAddr.String())
	}
	if diff := cmp.Diff([]string{"10.0.0.100", "10.0.0.101", "10.0.0.102", "none"}, got); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
	// The first client takes its address, then finds it in use on the wire.
	m := net.HardwareAddr{2, 1, 0, 0, 0, 0}
	f.do(t, pkt(t, dhcpv4.MessageTypeRequest, m, sid, reqIP("10.0.0.100")))
	_, r := f.do(t, pkt(t, dhcpv4.MessageTypeDecline, m, sid, reqIP("10.0.0.100")))
	if r == nil || len(r.Ops) != 1 || r.Ops[0].Lease.State != lease.Declined {
		t.Fatalf("DECLINE gave %+v, want a quarantine write", r)
	}
	// Offers expire; the declined address stays out until its quarantine ends.
	f.now = f.now.Add(time.Minute)
	f.s.Reclaim(f.now)
	offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, m))
	if offer == nil || offer.YourIPAddr.String() == "10.0.0.100" {
		t.Fatalf("after DECLINE offered %v", offer)
	}
	f.now = f.now.Add(time.Hour)
	ops, _ := f.s.Reclaim(f.now)
	if len(ops) != 1 || ops[0].Key != "v4/10.0.0.100" {
		t.Errorf("quarantine end reclaimed %+v", ops)
	}
}

func TestOption82(t *testing.T) {
	f := newFixture(t, testConfig())
	raw := []byte{1, 23}
	raw = append(raw, "OLT1 xpon 0/1/0:5.1.116"...)
	raw = append(raw, 2, 4, 'O', 'N', 'T', '5')
	mac := net.HardwareAddr{2, 9, 9, 9, 9, 9}
	with82 := dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionRelayAgentInformation, raw))
	offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, mac, with82))
	if offer == nil || offer.YourIPAddr.String() != "10.0.0.60" {
		t.Fatalf("option 82 DISCOVER offered %v, want the service's 10.0.0.60", offer)
	}
	if diff := cmp.Diff(raw, offer.Options.Get(dhcpv4.OptionRelayAgentInformation)); diff != "" {
		t.Errorf("option 82 not echoed unchanged (-want +got):\n%s", diff)
	}
	_, r := f.do(t, pkt(t, dhcpv4.MessageTypeRequest, mac, with82, sid, reqIP("10.0.0.60")))
	if r == nil || len(r.Ops) != 1 {
		t.Fatalf("no ACK for option 82 REQUEST")
	}
	if l := r.Ops[0].Lease; l.CircuitID != "OLT1 xpon 0/1/0:5.1.116" || l.RemoteID != "ONT5" {
		t.Errorf("lease recorded circuit %q remote %q", l.CircuitID, l.RemoteID)
	}
	// Malformed option 82: dropped, not half-answered.
	bad := dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionRelayAgentInformation, []byte{1, 40, 'x'}))
	if got, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, mac, bad)); got != nil {
		t.Errorf("malformed option 82 answered %v", got)
	}
	// Switched off: the same port gets a pool address, option still echoed.
	cfg := testConfig()
	cfg.Option82.Enabled = false
	if err := f.s.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	offer, _ = f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, net.HardwareAddr{2, 9, 9, 9, 9, 8}, with82))
	if offer == nil || offer.YourIPAddr.String() == "10.0.0.60" || offer.Options.Get(dhcpv4.OptionRelayAgentInformation) == nil {
		t.Errorf("option 82 disabled: offered %v", offer)
	}
}

func TestRelayedAndInform(t *testing.T) {
	f := newFixture(t, testConfig())
	relayed := pkt(t, dhcpv4.MessageTypeDiscover, macDyn, dhcpv4.WithGatewayIP(net.IPv4(10, 0, 0, 2)))
	offer, r := f.do(t, relayed)
	if offer == nil || r.Dst.String() != "10.0.0.2:67" {
		t.Fatalf("relayed DISCOVER answered %v to %v", offer, r)
	}
	unknown := pkt(t, dhcpv4.MessageTypeDiscover, macDyn, dhcpv4.WithGatewayIP(net.IPv4(172, 16, 0, 1)))
	if got, _ := f.do(t, unknown); got != nil {
		t.Errorf("relay from an unserved network answered %v", got)
	}
	ack, r := f.do(t, pkt(t, dhcpv4.MessageTypeInform, macDyn, dhcpv4.WithClientIP(net.IPv4(10, 0, 0, 77))))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || len(r.Ops) != 0 {
		t.Fatalf("INFORM answered %v ops %v", ack, r)
	}
	if ack.Options.Has(dhcpv4.OptionIPAddressLeaseTime) || ack.DomainName() != "isp.example" {
		t.Errorf("INFORM answer: lease time present=%v domain %q", ack.Options.Has(dhcpv4.OptionIPAddressLeaseTime), ack.DomainName())
	}
}

func TestUnservedInterface(t *testing.T) {
	f := newFixture(t, testConfig())
	if r := f.s.Handle("eth9", pkt(t, dhcpv4.MessageTypeDiscover, macDyn).ToBytes()); r != nil {
		t.Errorf("request on an unserved interface answered %+v", r)
	}
}

// TestReconfigureKeepsLeases: a bound lease survives a reconfiguration that
// shrinks the pool, and its address is not offered to anyone else.
func TestReconfigureKeepsLeases(t *testing.T) {
	f := newFixture(t, testConfig())
	f.do(t, pkt(t, dhcpv4.MessageTypeRequest, macDyn, reqIP("10.0.0.101")))
	cfg := testConfig()
	cfg.Networks[0].LeaseTime = 2 * time.Hour
	if err := f.s.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, net.HardwareAddr{2, 3, 0, 0, 0, byte(i)}))
		if offer == nil || offer.YourIPAddr.String() == "10.0.0.101" {
			t.Fatalf("after reconfigure offered %v", offer)
		}
		if got, want := offer.IPAddressLeaseTime(0), 2*time.Hour; got != want {
			t.Errorf("lease time %v, want %v", got, want)
		}
	}
	ack, _ := f.do(t, pkt(t, dhcpv4.MessageTypeRequest, macDyn, dhcpv4.WithClientIP(net.IPv4(10, 0, 0, 101))))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Errorf("renewal after reconfigure answered %v", ack)
	}
}

// FuzzHandle feeds arbitrary bytes through parsing and the handler chain:
// nothing may panic, and whatever is answered must parse.
func FuzzHandle(f *testing.F) {
	d, _ := dhcpv4.NewDiscovery(macDyn)
	f.Add(d.ToBytes())
	r, _ := dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(macDyn),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionRelayAgentInformation, []byte{1, 3, 'a', 'b', 'c'})))
	f.Add(r.ToBytes())
	f.Add([]byte{1, 1, 6, 0})
	cfg := testConfig()
	tab := lease.NewTable()
	s, err := New(cfg, Deps{Table: tab, Now: func() time.Time { return t0 }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if rep := s.Handle("v100", b); rep != nil && rep.Resp != nil {
			if _, err := dhcpv4.FromBytes(rep.Resp); err != nil {
				t.Fatalf("answer does not parse: %v", err)
			}
		}
	})
}

func TestTruncated(t *testing.T) {
	d, _ := dhcpv4.NewDiscovery(macDyn)
	b := d.ToBytes()
	var r request
	for n := 0; n < len(b); n++ {
		if err := parse(b[:n], &r); err == nil && n < 240 {
			t.Errorf("a %d-byte packet parsed", n)
		}
	}
	// An option whose length runs past the end is refused, not read short.
	bad := append(append([]byte(nil), b[:240]...), optHostname, 10, 'a', 'b')
	if err := parse(bad, &r); err == nil {
		t.Errorf("an option running past the end parsed")
	}
}

// TestWireOptions covers what the hand-written reader must get right that
// the happy path does not show: options in the file field (option 52),
// a split option concatenated (RFC 3396), and BOOTP (no option 53) ignored.
func TestWireOptions(t *testing.T) {
	d, _ := dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(macDyn))
	b := d.ToBytes()
	// Overload: the requested address moves into the file field.
	b = append(b[:240], optMsgType, 1, msgRequest, optOverload, 1, 1, optHostname, 3, 'c', 'p', 'e', optHostname, 2, '-', '1', optEnd)
	copy(b[offFile:], []byte{optRequested, 4, 10, 0, 0, 101, optEnd})
	var r request
	if err := parse(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.requested != netip.MustParseAddr("10.0.0.101") || string(r.hostname) != "cpe-1" {
		t.Errorf("requested %v hostname %q, want 10.0.0.101 from the file field and cpe-1 concatenated", r.requested, r.hostname)
	}
	if err := parse(append(b[:240], optHostname, 1, 'x', optEnd), &r); err == nil {
		t.Errorf("a BOOTP request (no message type) parsed as DHCP")
	}
}

// TestClientID: a client that sends option 61 is identified by it (RFC
// 2131 4.2), so its lease follows the identifier, and it is echoed (RFC
// 6842).
func TestClientID(t *testing.T) {
	f := newFixture(t, testConfig())
	cid := dhcpv4.WithOption(dhcpv4.OptClientIdentifier([]byte{0xff, 1, 2, 3, 4}))
	offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, macDyn, cid))
	if offer == nil || offer.YourIPAddr.String() != "10.0.0.100" {
		t.Fatalf("DISCOVER with client-id answered %v", offer)
	}
	if got := offer.Options.Get(dhcpv4.OptionClientIdentifier); string(got) != string([]byte{0xff, 1, 2, 3, 4}) {
		t.Errorf("option 61 echoed as %x", got)
	}
	ack, r := f.do(t, pkt(t, dhcpv4.MessageTypeRequest, macDyn, cid, sid, reqIP("10.0.0.100")))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || r.Ops[0].Lease.ClientID != "ff01020304" {
		t.Fatalf("REQUEST with client-id answered %v, ops %+v", ack, r.Ops)
	}
	// The same MAC without the identifier is another client: the address
	// is not its to take.
	nak, _ := f.do(t, pkt(t, dhcpv4.MessageTypeRequest, macDyn, reqIP("10.0.0.100")))
	if nak == nil || nak.MessageType() != dhcpv4.MessageTypeNak {
		t.Errorf("the MAC without its client-id got %v, want NAK", nak)
	}
}

// TestElementReservations: reservations added, changed and removed one at
// a time (SetClient, SetService) are served at the next DISCOVER; a
// removed fixed address inside the pool goes back to the pool, one a
// lease still holds does not.
func TestElementReservations(t *testing.T) {
	cfg := testConfig()
	cfg.Clients, cfg.Services = nil, nil
	f := newFixture(t, cfg)
	mac := net.HardwareAddr{2, 7, 0, 0, 0, 1}
	c := config.Client{MAC: mac.String(), IP: netip.MustParseAddr("10.0.0.70"), Hostname: "elem"}
	f.s.SetClient(nil, &c)
	if offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, mac)); offer == nil || offer.YourIPAddr.String() != "10.0.0.70" || offer.HostName() != "elem" {
		t.Fatalf("added reservation offered %v", offer)
	}
	c2 := c
	c2.IP = netip.MustParseAddr("10.0.0.101") // inside the pool: taken out of it
	f.s.SetClient(&c, &c2)
	if offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, mac)); offer == nil || offer.YourIPAddr.String() != "10.0.0.101" {
		t.Fatalf("changed reservation offered %v", offer)
	}
	var got []string
	for i := range 3 {
		if offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, net.HardwareAddr{2, 8, 0, 0, 0, byte(i)})); offer != nil {
			got = append(got, offer.YourIPAddr.String())
		}
	}
	if diff := cmp.Diff([]string{"10.0.0.100", "10.0.0.102"}, got); diff != "" {
		t.Errorf("dynamic offers beside a fixed pool address (-want +got):\n%s", diff)
	}
	f.s.SetClient(&c2, nil)
	f.now = f.now.Add(time.Hour)
	f.s.Reclaim(f.now) // the offers above expire
	if offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, mac)); offer == nil || offer.YourIPAddr.String() == "10.0.0.70" {
		t.Fatalf("removed reservation still offered %v", offer)
	}

	// Services: bound by option 82, changed, removed.
	raw := append([]byte{1, 23}, "OLT1 xpon 0/1/0:7.1.116"...)
	with82 := dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionRelayAgentInformation, raw))
	sv := config.Service{ID: "svc_7", OLT: "OLT1", PON: "0/1/0", ONTID: 7, IPv4: netip.MustParseAddr("10.0.0.77")}
	f.s.SetService(nil, &sv)
	cpe := net.HardwareAddr{2, 9, 0, 0, 0, 7}
	if offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, cpe, with82)); offer == nil || offer.YourIPAddr.String() != "10.0.0.77" {
		t.Fatalf("added service offered %v", offer)
	}
	sv2 := sv
	sv2.IPv4 = netip.MustParseAddr("10.0.0.78")
	f.s.SetService(&sv, &sv2)
	if offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, net.HardwareAddr{2, 9, 0, 0, 1, 7}, with82)); offer == nil || offer.YourIPAddr.String() != "10.0.0.78" {
		t.Fatalf("changed service offered %v", offer)
	}
	f.s.SetService(&sv2, nil)
	if offer, _ := f.do(t, pkt(t, dhcpv4.MessageTypeDiscover, net.HardwareAddr{2, 9, 0, 0, 2, 7}, with82)); offer != nil && offer.YourIPAddr.String() == "10.0.0.78" {
		t.Fatalf("removed service still offered %v", offer)
	}
}
