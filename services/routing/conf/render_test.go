package conf

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"routerd.dev/proto/api"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func ptr[T any](v T) *T { return &v }

// full is a settings document using every feature.
func full(t *testing.T) Settings {
	t.Helper()
	s := Settings{}
	seal := func(_, p string) (string, error) { return "sealed:" + p, nil }
	must := func(_ string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Set(&api.BGPSet{ASN: ptr[int64](65010), RouterID: ptr("198.18.0.2"), Enabled: ptr(true), RPKI: ptr(true)}))
	must(s.PeerAdd(&api.BGPPeerAdd{Name: "up-1", IP: "198.18.0.1", ASN: 65000, Password: ptr(`s3cr'et`), BlackholeCommunity: ptr("65000:666"), BFD: ptr(true), Description: ptr("transit A")}, seal))
	must(s.PeerAdd(&api.BGPPeerAdd{Name: "up_2", IP: "2001:db8:ffff::1", ASN: 65001, Routes: ptr("full"), Role: ptr("backup"), Multihop: ptr[int64](2)}, seal))
	must(s.PeerAdd(&api.BGPPeerAdd{Name: "core", IP: "10.0.0.2", ASN: 65010, Type: ptr("ibgp"), Enabled: ptr(false)}, seal))
	must(s.AnnounceAdd("185.10.0.0/22"))
	must(s.AnnounceAdd("2a0a:1000::/32"))
	must(s.BlackholeAdd("185.10.1.7"))
	must(s.BlackholeAdd("2a0a:1000::7"))
	must(s.OSPFSet(&api.OSPFSet{Enabled: ptr(true), Area: ptr("0"), OriginateDefault: ptr(true)}))
	must(s.OSPFIfaceAdd(&api.OSPFIfaceAdd{Name: "eth1", Cost: 20}))
	must(s.OSPFIfaceAdd(&api.OSPFIfaceAdd{Name: "lo", Cost: 10, Passive: true}))
	if p := s.Problems(); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
	return s
}

// birdCheck runs `bird -p` on text; skipped when BIRD is not installed.
func birdCheck(t *testing.T, text string) {
	t.Helper()
	bin, err := exec.LookPath("bird")
	if err != nil {
		t.Log("bird not installed: configuration not checked by the daemon")
		return
	}
	f := filepath.Join(t.TempDir(), "bird.conf")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-p", "-c", f).CombinedOutput(); err != nil {
		t.Fatalf("bird -p refused the configuration: %v\n%s\n%s", err, out, numbered(text))
	}
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%4d %s\n", i+1, l)
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the rendering:\n%s", path, got)
	}
}

func TestRenderGolden(t *testing.T) {
	open := func(_, s string) (string, error) { return strings.TrimPrefix(s, "sealed:"), nil }
	cases := map[string]Settings{
		"empty.conf": {},
		"full.conf":  full(t),
	}
	off := full(t)
	off.Enabled, off.OSPF.Enabled, off.RPKI = false, false, false
	cases["off.conf"] = off
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			text, err := Render(s, Options{Open: open, RTR: "127.0.0.1:8282"})
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name, text)
			birdCheck(t, text)
			masked, err := Render(s, Options{Open: open, Mask: true})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(masked, "s3cr") {
				t.Fatalf("masked rendering holds the password")
			}
			birdCheck(t, masked)
		})
	}
}

func TestMaxPrefixDefaults(t *testing.T) {
	s := Settings{ASN: 65010}
	seal := func(_, p string) (string, error) { return p, nil }
	if _, err := s.PeerAdd(&api.BGPPeerAdd{Name: "a", IP: "198.18.0.1", ASN: 65000}, seal); err != nil {
		t.Fatal(err)
	}
	if got := EffectiveMaxPrefix(&s.Peers[0]); got != 16 {
		t.Errorf("default-route peer: %d", got)
	}
	// Turned into a full-table peer without a max_prefix: the full table's.
	if _, err := s.PeerAdd(&api.BGPPeerAdd{Name: "a", IP: "198.18.0.1", ASN: 65000, Routes: ptr("full")}, seal); err != nil {
		t.Fatal(err)
	}
	if got := EffectiveMaxPrefix(&s.Peers[0]); got != 1_500_000 {
		t.Errorf("full IPv4: %d", got)
	}
	if _, err := s.PeerAdd(&api.BGPPeerAdd{Name: "b", IP: "2001:db8::1", ASN: 65000, Routes: ptr("full")}, seal); err != nil {
		t.Fatal(err)
	}
	if got := EffectiveMaxPrefix(&s.Peers[1]); got != 400_000 {
		t.Errorf("full IPv6: %d", got)
	}
	if _, err := s.PeerAdd(&api.BGPPeerAdd{Name: "b", IP: "2001:db8::1", ASN: 65000, MaxPrefix: ptr[int64](1000)}, seal); err != nil {
		t.Fatal(err)
	}
	if got := EffectiveMaxPrefix(&s.Peers[1]); got != 1000 {
		t.Errorf("explicit: %d", got)
	}
	// Fields not sent stay.
	if s.Peers[1].Routes != "full" || !s.Peers[1].Enabled || s.Peers[1].Type != "upstream" || s.Peers[1].Role != "primary" {
		t.Errorf("peer b: %+v", s.Peers[1])
	}
}

func TestChecks(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"185.10.0.0/22", true}, {"185.10.0.0/8", false}, {"185.0.0.0/8", true}, {"185.10.0.0/25", false},
		{"10.0.0.0/8", false}, {"100.64.0.0/10", false}, {"2a0a:1000::/32", true}, {"2a0a::/15", false},
		{"2a0a:1000::/49", false}, {"2001:db8::/32", false}, {"fc00::/7", false}, {"185.10.0.1/22", false}, {"nonsense", false},
	} {
		if _, err := CheckAnnounce(c.in); (err == nil) != c.ok {
			t.Errorf("announce %s: %v", c.in, err)
		}
	}
	for _, c := range []struct {
		in string
		ok bool
	}{{"185.10.1.7", true}, {"192.168.1.1", false}, {"2a0a:1000::7", true}, {"::1", false}, {"224.0.0.1", false}} {
		if _, err := CheckBlackhole(c.in); (err == nil) != c.ok {
			t.Errorf("blackhole %s: %v", c.in, err)
		}
	}
	if a, err := ParseArea("1"); err != nil || a != "0.0.0.1" {
		t.Errorf("area 1: %s %v", a, err)
	}
}
