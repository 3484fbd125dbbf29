package e2e

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
	"google.golang.org/protobuf/types/known/anypb"

	"routerd.dev/shared/netns"
)

type gobgpQuiet struct{}

func (gobgpQuiet) Panic(msg string, f glog.Fields) { panic(msg) }
func (gobgpQuiet) Fatal(msg string, f glog.Fields) { panic(msg) }
func (gobgpQuiet) Error(string, glog.Fields)       {}
func (gobgpQuiet) Warn(string, glog.Fields)        {}
func (gobgpQuiet) Info(string, glog.Fields)        {}
func (gobgpQuiet) Debug(string, glog.Fields)       {}
func (gobgpQuiet) SetLevel(glog.LogLevel)          {}
func (gobgpQuiet) GetLevel() glog.LogLevel         { return glog.ErrorLevel }

var gobgpV4 = &gapi.Family{Afi: gapi.Family_AFI_IP, Safi: gapi.Family_SAFI_UNICAST}

// labGobgp runs an in-process gobgp upstream (AS 65000, passive) in the
// lab's uplink namespace on 198.18.0.1, peering with the router's
// 198.18.0.2 (AS 65010), sending the given prefixes.
func labGobgp(t *testing.T, prefix string, routes ...string) *server.BgpServer {
	t.Helper()
	ns, err := netns.Open(filepath.Join("/run/netns", prefix+"-uplink"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	s := server.NewBgpServer(server.LoggerOption(gobgpQuiet{}))
	// The server goroutine's thread is in the uplink namespace, so its
	// listener is there; Serve never returns (the thread stays with it).
	go func() { _ = ns.Do(func() error { s.Serve(); return nil }) }()
	ctx := context.Background()
	if err := s.StartBgp(ctx, &gapi.StartBgpRequest{Global: &gapi.Global{Asn: 65000, RouterId: "198.18.0.1",
		ListenPort: 179, ListenAddresses: []string{"198.18.0.1"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if err := s.AddPeer(ctx, &gapi.AddPeerRequest{Peer: &gapi.Peer{
		Conf:      &gapi.PeerConf{NeighborAddress: "198.18.0.2", PeerAsn: 65010},
		Transport: &gapi.Transport{PassiveMode: true},
		AfiSafis:  []*gapi.AfiSafi{{Config: &gapi.AfiSafiConfig{Family: gobgpV4, Enabled: true}}},
	}}); err != nil {
		t.Fatal(err)
	}
	origin, _ := anypb.New(&gapi.OriginAttribute{Origin: 0})
	nh, _ := anypb.New(&gapi.NextHopAttribute{NextHop: "198.18.0.1"})
	for _, r := range routes {
		p := netip.MustParsePrefix(r)
		nlri, _ := anypb.New(&gapi.IPAddressPrefix{Prefix: p.Addr().String(), PrefixLen: uint32(p.Bits())})
		if _, err := s.AddPath(ctx, &gapi.AddPathRequest{TableType: gapi.TableType_GLOBAL,
			Path: &gapi.Path{Family: gobgpV4, Nlri: nlri, Pattrs: []*anypb.Any{origin, nh}}}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// gobgpGot is the AS path and communities gobgp received for prefix from
// the router; ok false when it has none.
func gobgpGot(t *testing.T, s *server.BgpServer, prefix string) (path, comms []uint32, ok bool) {
	t.Helper()
	err := s.ListPath(context.Background(), &gapi.ListPathRequest{TableType: gapi.TableType_ADJ_IN, Name: "198.18.0.2", Family: gobgpV4,
		Prefixes: []*gapi.TableLookupPrefix{{Prefix: prefix, Type: gapi.TableLookupPrefix_EXACT}}}, func(d *gapi.Destination) {
		if d.Prefix != prefix || len(d.Paths) == 0 {
			return
		}
		ok = true
		for _, a := range d.Paths[0].Pattrs {
			switch v, _ := apiutil.UnmarshalAttribute(a); v := v.(type) {
			case *bgp.PathAttributeAsPath:
				for _, seg := range v.Value {
					path = append(path, seg.GetAS()...)
				}
			case *bgp.PathAttributeCommunities:
				comms = v.Value
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return path, comms, ok
}

// TestLabBGPWithGobgp: routerd --lab, its BIRD in the lab's router
// namespace, an in-process gobgp upstream in the lab's uplink namespace,
// everything through the HTTP API: the session reaches Established; the
// upstream's default is taken and its other route filtered (only the
// default in the router's kernel); our prefix arrives with AS path
// [65010]; a blackhole arrives with 65535:666, the upstream's community
// and NO_EXPORT and is a blackhole route in the router; an unconfirmed
// change (role backup: path prepended at the upstream) is undone at the
// deadline, and the upstream sees the path without the prepends again.
func TestLabBGPWithGobgp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	if _, err := exec.LookPath("bird"); err != nil {
		t.Skip("bird (package bird2) is not installed")
	}
	bin, prefix, state := binary(t), uniquePrefix(), t.TempDir()
	config := filepath.Join(state, "routerd.yaml")
	if err := os.WriteFile(config, []byte("bgp_confirm_s: 8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startLabConfig(t, bin, prefix, state, config)
	g := labGobgp(t, prefix, "0.0.0.0/0", "8.8.8.0/24")

	r.must("POST", "/bgp/set", map[string]any{"asn": 65010, "router_id": "198.18.0.2"}, 200)
	r.must("POST", "/bgp/peer-add", map[string]any{"name": "transit", "ip": "198.18.0.1", "asn": 65000, "blackhole_community": "65000:666"}, 200)
	r.must("POST", "/bgp/announce-add", map[string]any{"prefix": "185.10.0.0/22"}, 200)
	r.must("POST", "/bgp/set", map[string]any{"enabled": true}, 200)
	r.must("POST", "/bgp/confirm", nil, 200)

	eventually(t, 30*time.Second, func() error {
		v := r.must("GET", "/bgp", nil, 200)
		for _, x := range v["peers"].([]any) {
			p := x.(map[string]any)
			if p["name"] == "transit" && p["state"] == "Established" && p["received"] == 2.0 && p["filtered"] == 1.0 && p["best"] == 1.0 {
				return nil
			}
		}
		return fmt.Errorf("peers: %v", v["peers"])
	})
	if out := strings.TrimSpace(r.inRouter("ip", "-4", "route", "show", "proto", "bird")); !strings.HasPrefix(out, "default via 198.18.0.1") || strings.Contains(out, "8.8.8.0") {
		t.Fatalf("router's kernel routes from BIRD:\n%s", out)
	}
	eventually(t, 10*time.Second, func() error {
		if path, comms, ok := gobgpGot(t, g, "185.10.0.0/22"); !ok || !slices.Equal(path, []uint32{65010}) || len(comms) != 0 {
			return fmt.Errorf("our prefix at gobgp: %v %v %v", ok, path, comms)
		}
		return nil
	})

	if a := r.must("POST", "/bgp/blackhole-add", map[string]any{"ip": "185.10.1.7"}, 200); a["pending"] != false {
		t.Fatalf("blackhole-add: %v", a)
	}
	eventually(t, 10*time.Second, func() error {
		_, comms, ok := gobgpGot(t, g, "185.10.1.7/32")
		for _, c := range []uint32{65535<<16 | 666, 65000<<16 | 666, 0xFFFFFF01} {
			if !slices.Contains(comms, c) {
				return fmt.Errorf("blackhole at gobgp (%v) lacks %d:%d: %v", ok, c>>16, c&0xffff, comms)
			}
		}
		return nil
	})
	if out := strings.TrimSpace(r.inRouter("ip", "-4", "route", "show", "185.10.1.7")); !strings.HasPrefix(out, "blackhole 185.10.1.7") {
		t.Fatalf("no blackhole route in the router: %q", out)
	}

	// Not confirmed: the backup role's prepends reach the upstream, and
	// go again when the timer undoes the change.
	if a := r.must("POST", "/bgp/peer-add", map[string]any{"name": "transit", "ip": "198.18.0.1", "asn": 65000, "role": "backup"}, 200); a["pending"] != true {
		t.Fatalf("peer change: %v", a)
	}
	eventually(t, 6*time.Second, func() error {
		if path, _, _ := gobgpGot(t, g, "185.10.0.0/22"); !slices.Equal(path, []uint32{65010, 65010, 65010}) {
			return fmt.Errorf("path at gobgp while pending: %v", path)
		}
		return nil
	})
	eventually(t, 30*time.Second, func() error {
		v := r.must("GET", "/bgp", nil, 200)
		if v["pending"] != nil {
			return fmt.Errorf("still pending: %v", v["pending"])
		}
		if path, _, _ := gobgpGot(t, g, "185.10.0.0/22"); !slices.Equal(path, []uint32{65010}) {
			return fmt.Errorf("path at gobgp after the undo: %v", path)
		}
		return nil
	})
	if len(r.must("GET", "/bgp", nil, 200)["blackhole"].([]any)) != 1 {
		t.Fatalf("the undo took the blackhole too")
	}
}
