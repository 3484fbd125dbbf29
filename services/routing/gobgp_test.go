// Go's listeners are MPTCP by default (Go 1.24), and an MPTCP socket
// refuses TCP_MD5SIG and IP_TTL: gobgp's listener then cannot take the
// peer's password. Plain TCP in this test binary.
//
//go:debug multipathtcp=0

package routing_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gapi "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	glog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"
	"github.com/vishvananda/netlink"
	"google.golang.org/protobuf/types/known/anypb"

	"routerd.dev/proto/api"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// The gobgp test peer: an upstream in the uplink namespace, run in this
// process (github.com/osrg/gobgp/v3). It listens on the uplink side only
// (passive: BIRD opens the session), so every socket it has is created on
// its server goroutine, which runs on a thread switched into the namespace.

var (
	famV4 = &gapi.Family{Afi: gapi.Family_AFI_IP, Safi: gapi.Family_SAFI_UNICAST}
	famV6 = &gapi.Family{Afi: gapi.Family_AFI_IP6, Safi: gapi.Family_SAFI_UNICAST}
)

// Well-known communities (RFC 1997, RFC 7999).
const (
	commBlackhole = 65535<<16 | 666
	commNoExport  = 0xFFFFFF01
)

type quiet struct{}

func (quiet) Panic(msg string, f glog.Fields) { panic(msg) }
func (quiet) Fatal(msg string, f glog.Fields) { panic(msg) }
func (quiet) Error(string, glog.Fields)       {}
func (quiet) Warn(string, glog.Fields)        {}
func (quiet) Info(string, glog.Fields)        {}
func (quiet) Debug(string, glog.Fields)       {}
func (quiet) SetLevel(glog.LogLevel)          {}
func (quiet) GetLevel() glog.LogLevel         { return glog.ErrorLevel }

type gobgpPeer struct {
	s *server.BgpServer
}

// startGobgp runs a gobgp speaker of AS asn in namespace ns, listening on
// port 179 of the given addresses.
func startGobgp(t testing.TB, ns *netns.NS, asn uint32, rid string, listen ...string) *gobgpPeer {
	t.Helper()
	s := server.NewBgpServer(server.LoggerOption(quiet{}))
	// Serve never returns: its goroutine keeps a thread in the namespace
	// for as long as the test binary runs (one per test).
	go func() { _ = ns.Do(func() error { s.Serve(); return nil }) }()
	if err := s.StartBgp(context.Background(), &gapi.StartBgpRequest{Global: &gapi.Global{
		Asn: asn, RouterId: rid, ListenPort: 179, ListenAddresses: listen,
	}}); err != nil {
		t.Fatalf("gobgp: %v", err)
	}
	t.Cleanup(s.Stop)
	return &gobgpPeer{s: s}
}

// neighbor adds a passive neighbour with the families given.
func (g *gobgpPeer) neighbor(t testing.TB, addr string, asn uint32, password string, fams ...*gapi.Family) {
	t.Helper()
	var afs []*gapi.AfiSafi
	for _, f := range fams {
		afs = append(afs, &gapi.AfiSafi{Config: &gapi.AfiSafiConfig{Family: f, Enabled: true}})
	}
	if err := g.s.AddPeer(context.Background(), &gapi.AddPeerRequest{Peer: &gapi.Peer{
		Conf:      &gapi.PeerConf{NeighborAddress: addr, PeerAsn: asn, AuthPassword: password},
		Transport: &gapi.Transport{PassiveMode: true},
		AfiSafis:  afs,
	}}); err != nil {
		t.Fatalf("gobgp neighbor %s: %v", addr, err)
	}
}

// originate makes the peer send prefix with next hop nh; path, when
// given, is the AS path behind the peer's own AS (its last the origin).
func (g *gobgpPeer) originate(t testing.TB, prefix, nh string, path ...uint32) {
	t.Helper()
	p := netip.MustParsePrefix(prefix)
	nlri, _ := anypb.New(&gapi.IPAddressPrefix{Prefix: p.Addr().String(), PrefixLen: uint32(p.Bits())})
	origin, _ := anypb.New(&gapi.OriginAttribute{Origin: 0})
	attrs := []*anypb.Any{origin}
	fam := famV4
	if p.Addr().Is6() {
		fam = famV6
		mp, _ := anypb.New(&gapi.MpReachNLRIAttribute{Family: famV6, NextHops: []string{nh}, Nlris: []*anypb.Any{nlri}})
		attrs = append(attrs, mp)
	} else {
		n, _ := anypb.New(&gapi.NextHopAttribute{NextHop: nh})
		attrs = append(attrs, n)
	}
	if len(path) > 0 {
		a, _ := anypb.New(&gapi.AsPathAttribute{Segments: []*gapi.AsSegment{{Type: 2, Numbers: path}}})
		attrs = append(attrs, a)
	}
	if _, err := g.s.AddPath(context.Background(), &gapi.AddPathRequest{TableType: gapi.TableType_GLOBAL,
		Path: &gapi.Path{Family: fam, Nlri: nlri, Pattrs: attrs}}); err != nil {
		t.Fatalf("gobgp originate %s: %v", prefix, err)
	}
}

// state is the session state gobgp has with neighbour addr.
func (g *gobgpPeer) state(addr string) (gapi.PeerState_SessionState, uint64) {
	st := gapi.PeerState_UNKNOWN
	var received uint64
	_ = g.s.ListPeer(context.Background(), &gapi.ListPeerRequest{Address: addr, EnableAdvertised: true}, func(p *gapi.Peer) {
		st = p.State.SessionState
		for _, af := range p.AfiSafis {
			if af.State != nil {
				received += af.State.Received
			}
		}
	})
	return st, received
}

// received is what gobgp holds from neighbour addr for prefix (before its
// own policy): AS path and communities; ok false when it has none.
type receivedRoute struct {
	path  []uint32
	comms []uint32
	nh    string
}

func (g *gobgpPeer) route(t testing.TB, addr, prefix string) (receivedRoute, bool) {
	t.Helper()
	fam := famV4
	if strings.Contains(prefix, ":") {
		fam = famV6
	}
	var out receivedRoute
	found := false
	err := g.s.ListPath(context.Background(), &gapi.ListPathRequest{TableType: gapi.TableType_ADJ_IN, Name: addr, Family: fam,
		Prefixes: []*gapi.TableLookupPrefix{{Prefix: prefix, Type: gapi.TableLookupPrefix_EXACT}}}, func(d *gapi.Destination) {
		if d.Prefix != prefix || len(d.Paths) == 0 {
			return
		}
		found = true
		for _, a := range d.Paths[0].Pattrs {
			pa, err := apiutil.UnmarshalAttribute(a)
			if err != nil {
				continue
			}
			switch v := pa.(type) {
			case *bgp.PathAttributeAsPath:
				for _, seg := range v.Value {
					out.path = append(out.path, seg.GetAS()...)
				}
			case *bgp.PathAttributeCommunities:
				out.comms = v.Value
			case *bgp.PathAttributeNextHop:
				out.nh = v.Value.String()
			case *bgp.PathAttributeMpReachNLRI:
				out.nh = v.Nexthop.String()
			}
		}
	})
	if err != nil {
		t.Fatalf("gobgp list: %v", err)
	}
	return out, found
}

func birdRoutes(t testing.TB, r *netns.NS, fam string) []string {
	t.Helper()
	out := testenv.Run(t, r, "ip", "-"+fam, "route", "show", "proto", "bird")
	var dst []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			dst = append(dst, f[0])
		}
	}
	return dst
}

// TestGobgpUpstream: the service's BIRD peers with an in-process gobgp
// upstream (MD5): the session reaches Established on both sides; our
// prefix arrives with our AS as its path; a default-route upstream that
// sends a default and two more prefixes has the two filtered (BIRD's
// filtered count, only the default in the kernel); a blackhole arrives
// with 65535:666, the peer's own community and NO_EXPORT and the address
// is unreachable here; as a backup upstream our AS is prepended twice.
func TestGobgpUpstream(t *testing.T) {
	needBird(t)
	t.Parallel()
	r, u := testenv.Netns(t), testenv.Netns(t)
	link(t, r, u)
	g := startGobgp(t, u, 65000, "198.18.0.1", "198.18.0.1")
	g.neighbor(t, "198.18.0.2", 65010, "s3cret-md5", famV4)
	g.originate(t, "0.0.0.0/0", "198.18.0.1")
	g.originate(t, "8.8.8.0/24", "198.18.0.1")
	g.originate(t, "9.9.9.0/24", "198.18.0.1", 64496)

	env := testenv.Start(t)
	dir := t.TempDir()
	start(t, env, r, dir, time.Minute)
	call(t, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up-1", "ip": "198.18.0.1", "asn": 65000,
		"password": "s3cret-md5", "blackhole_community": "65000:666"}, 200)
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "185.10.0.0/22"}, 200)
	call(t, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)

	testenv.Eventually(t, 30*time.Second, func() error {
		p := peerOf(t, call(t, env, api.BGPGet, nil, 200), "up-1")
		if p["state"] != "Established" || p["received"].(float64) != 3 || p["filtered"].(float64) != 2 || p["best"].(float64) != 1 || p["sent"].(float64) != 1 {
			return fmt.Errorf("peer: %v", p)
		}
		if st, _ := g.state("198.18.0.2"); st != gapi.PeerState_ESTABLISHED {
			return fmt.Errorf("gobgp sees %v", st)
		}
		return nil
	})
	// Only the default reached the kernel.
	if got := birdRoutes(t, r, "4"); !slices.Equal(got, []string{"default"}) {
		t.Fatalf("kernel routes from BIRD: %v, want only the default", got)
	}
	if out := birdShow(t, filepath.Join(dir, "bird.ctl"), "show route filtered"); !strings.Contains(out, "8.8.8.0/24") || !strings.Contains(out, "9.9.9.0/24") {
		t.Fatalf("filtered routes:\n%s", out)
	}
	// Our prefix at the upstream: path [65010], next hop us, no community.
	testenv.Eventually(t, 10*time.Second, func() error {
		rt, ok := g.route(t, "198.18.0.2", "185.10.0.0/22")
		if !ok || !slices.Equal(rt.path, []uint32{65010}) || rt.nh != "198.18.0.2" || len(rt.comms) != 0 {
			return fmt.Errorf("at gobgp: %v %+v", ok, rt)
		}
		return nil
	})
	if _, ok := g.route(t, "198.18.0.2", "0.0.0.0/0"); ok {
		t.Errorf("the upstream's default went back to it")
	}

	// Blackhole: the three communities at the upstream, dropped here.
	call(t, env, api.BGPBhAddOp, map[string]any{"ip": "185.10.1.7"}, 200)
	testenv.Eventually(t, 10*time.Second, func() error {
		rt, ok := g.route(t, "198.18.0.2", "185.10.1.7/32")
		for _, c := range []uint32{commBlackhole, 65000<<16 | 666, commNoExport} {
			if !slices.Contains(rt.comms, c) {
				return fmt.Errorf("blackhole at gobgp (%v) lacks %d:%d: %+v", ok, c>>16, c&0xffff, rt)
			}
		}
		return nil
	})
	nl, _ := r.Netlink()
	defer nl.Close()
	rs, err := nl.RouteGet([]byte{185, 10, 1, 7})
	if err == nil && !(len(rs) > 0 && rs[0].Type == 6 /* RTN_BLACKHOLE */) {
		t.Fatalf("185.10.1.7 is reachable from the router: %+v", rs)
	}
	if out := testenv.Run(t, r, "ip", "-4", "route", "show", "185.10.1.7"); !strings.HasPrefix(strings.TrimSpace(out), "blackhole 185.10.1.7") {
		t.Fatalf("kernel: %q", out)
	}
	call(t, env, api.BGPBhDelOp, map[string]any{"ip": "185.10.1.7"}, 200)
	testenv.Eventually(t, 10*time.Second, func() error {
		if _, ok := g.route(t, "198.18.0.2", "185.10.1.7/32"); ok {
			return fmt.Errorf("blackhole still at gobgp")
		}
		return nil
	})

	// Backup: our AS prepended twice more at the upstream.
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up-1", "ip": "198.18.0.1", "asn": 65000, "role": "backup"}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		rt, ok := g.route(t, "198.18.0.2", "185.10.0.0/22")
		if !ok || !slices.Equal(rt.path, []uint32{65010, 65010, 65010}) {
			return fmt.Errorf("at gobgp: %v %+v", ok, rt)
		}
		return nil
	})
}

// TestGobgpRPKI: with rpki on, a full-table gobgp upstream's route whose
// origin the VRP file contradicts is rejected (filtered, not in the
// kernel); one with a matching VRP and one without are kept.
func TestGobgpRPKI(t *testing.T) {
	needBird(t)
	t.Parallel()
	if _, err := exec.LookPath("stayrtr"); err != nil {
		t.Skip("stayrtr (Debian package stayrtr) is not installed")
	}
	r, u := testenv.Netns(t), testenv.Netns(t)
	link(t, r, u)
	g := startGobgp(t, u, 65000, "198.18.0.1", "198.18.0.1")
	g.neighbor(t, "198.18.0.2", 65010, "", famV4)
	g.originate(t, "8.8.8.0/24", "198.18.0.1", 64496)  // invalid: the VRP says AS15169
	g.originate(t, "8.8.4.0/24", "198.18.0.1", 15169)  // valid
	g.originate(t, "9.9.9.0/24", "198.18.0.1", 64497)  // no VRP: unknown, kept
	g.originate(t, "10.1.0.0/16", "198.18.0.1", 64497) // bogon

	vrps := filepath.Join(t.TempDir(), "vrps.json")
	if err := os.WriteFile(vrps, []byte(`{"roas":[{"prefix":"8.8.8.0/24","maxLength":24,"asn":"AS15169","ta":"test"},`+
		`{"prefix":"8.8.4.0/24","maxLength":24,"asn":"AS15169","ta":"test"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rtr := exec.Command("nsenter", "--net="+r.Path(), "stayrtr", "-cache", vrps, "-bind", "127.0.0.1:8282",
		"-checktime=false", "-metrics.addr", "", "-refresh", "600")
	var rtrOut strings.Builder
	rtr.Stdout, rtr.Stderr = &rtrOut, &rtrOut
	if err := rtr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rtr.Process.Kill(); _ = rtr.Wait() })

	env := testenv.Start(t)
	dir := t.TempDir()
	start(t, env, r, dir, time.Minute)
	call(t, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2", "rpki": true}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "transit", "ip": "198.18.0.1", "asn": 65000, "routes": "full"}, 200)
	call(t, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		v := call(t, env, api.BGPGet, nil, 200)
		st := v["rpki"].(map[string]any)["status"].(map[string]any)
		if st["vrps"].(float64) != 2 || st["data"] != "Established" {
			return fmt.Errorf("rpki status: %v (stayrtr: %s)", st, rtrOut.String())
		}
		p := peerOf(t, v, "transit")
		if p["state"] != "Established" || p["received"].(float64) != 4 || p["filtered"].(float64) != 2 || p["best"].(float64) != 2 {
			return fmt.Errorf("peer: %v", p)
		}
		return nil
	})
	got := birdRoutes(t, r, "4")
	slices.Sort(got)
	if !slices.Equal(got, []string{"8.8.4.0/24", "9.9.9.0/24"}) {
		t.Fatalf("kernel routes from BIRD: %v, want 8.8.4.0/24 and 9.9.9.0/24", got)
	}
}

// TestGobgpIPv6: an IPv6 session with gobgp (IPv6 peer address, IPv6
// unicast): the upstream's ::/0 received and installed, its other IPv6
// prefix filtered, our IPv6 prefix at the upstream with our AS and our
// address as next hop; an IPv4 session to the same upstream runs beside
// it, and an IPv6 blackhole arrives with the communities.
func TestGobgpIPv6(t *testing.T) {
	needBird(t)
	t.Parallel()
	r, u := testenv.Netns(t), testenv.Netns(t)
	link(t, r, u)
	g := startGobgp(t, u, 65000, "198.18.0.1", "198.18.0.1", "2001:db8:ffff::1")
	g.neighbor(t, "2001:db8:ffff::2", 65010, "", famV6)
	g.neighbor(t, "198.18.0.2", 65010, "", famV4)
	g.originate(t, "::/0", "2001:db8:ffff::1")
	g.originate(t, "2a0b:4000::/32", "2001:db8:ffff::1")
	g.originate(t, "0.0.0.0/0", "198.18.0.1")

	env := testenv.Start(t)
	start(t, env, r, t.TempDir(), time.Minute)
	call(t, env, api.BGPSetOp, map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up6", "ip": "2001:db8:ffff::1", "asn": 65000, "blackhole_community": "65000:666"}, 200)
	call(t, env, api.BGPPeerAddOp, map[string]any{"name": "up4", "ip": "198.18.0.1", "asn": 65000}, 200)
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "2a0a:1000::/32"}, 200)
	call(t, env, api.BGPAnnAddOp, map[string]any{"prefix": "185.10.0.0/22"}, 200)
	call(t, env, api.BGPSetOp, map[string]any{"enabled": true}, 200)
	call(t, env, api.BGPConfirmOp, nil, 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		v := call(t, env, api.BGPGet, nil, 200)
		p6, p4 := peerOf(t, v, "up6"), peerOf(t, v, "up4")
		if p6["state"] != "Established" || p6["received"].(float64) != 2 || p6["filtered"].(float64) != 1 || p6["sent"].(float64) != 1 || p6["max_prefix"].(float64) != 16 {
			return fmt.Errorf("peer up6: %v", p6)
		}
		if p4["state"] != "Established" || p4["received"].(float64) != 1 || p4["sent"].(float64) != 1 {
			return fmt.Errorf("peer up4: %v", p4)
		}
		return nil
	})
	testenv.Eventually(t, 10*time.Second, func() error {
		rt, ok := g.route(t, "2001:db8:ffff::2", "2a0a:1000::/32")
		if !ok || !slices.Equal(rt.path, []uint32{65010}) || rt.nh != "2001:db8:ffff::2" {
			return fmt.Errorf("IPv6 prefix at gobgp: %v %+v", ok, rt)
		}
		if _, ok := g.route(t, "2001:db8:ffff::2", "185.10.0.0/22"); ok {
			return fmt.Errorf("the IPv4 prefix went over the IPv6 session")
		}
		if rt, ok := g.route(t, "198.18.0.2", "185.10.0.0/22"); !ok || !slices.Equal(rt.path, []uint32{65010}) {
			return fmt.Errorf("IPv4 prefix at gobgp: %v %+v", ok, rt)
		}
		return nil
	})
	if got := birdRoutes(t, r, "6"); !slices.Equal(got, []string{"default"}) {
		t.Fatalf("IPv6 kernel routes from BIRD: %v, want only the default", got)
	}
	call(t, env, api.BGPBhAddOp, map[string]any{"ip": "2a0a:1000::7"}, 200)
	testenv.Eventually(t, 10*time.Second, func() error {
		rt, ok := g.route(t, "2001:db8:ffff::2", "2a0a:1000::7/128")
		for _, c := range []uint32{commBlackhole, 65000<<16 | 666, commNoExport} {
			if !slices.Contains(rt.comms, c) {
				return fmt.Errorf("IPv6 blackhole at gobgp (%v) lacks %d:%d: %+v", ok, c>>16, c&0xffff, rt)
			}
		}
		return nil
	})
	nl, _ := r.Netlink()
	defer nl.Close()
	if rs, err := nl.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE); err == nil {
		if !slices.ContainsFunc(rs, func(rt netlink.Route) bool {
			return rt.Dst != nil && rt.Dst.String() == "2a0a:1000::7/128" && rt.Type == 6
		}) {
			t.Errorf("no IPv6 blackhole route in the router's kernel")
		}
	}
}
