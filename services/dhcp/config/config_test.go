package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func valid() Config {
	return Config{
		Networks:  []Network{{Iface: "v100", Gateway: netip.MustParseAddr("10.0.0.1"), Prefix: netip.MustParsePrefix("10.0.0.0/24")}},
		Networks6: []Network6{{Iface: "v100", Gateway: netip.MustParseAddr("2001:db8::1"), Prefix: netip.MustParsePrefix("2001:db8::/64")}},
		PD: PD{Pool: netip.MustParsePrefix("2001:db8:a000::/48"), Len: 56, Reserve: 16,
			Slices: map[string]Slice{"v100": {Index: 16, Size: 16}},
			Pinned: []Pinned{{MAC: "aabbccddeeff", Prefix: netip.MustParsePrefix("2001:db8:a000:100::/56")}}},
		Clients: []Client{{MAC: "aa-bb-cc-dd-ee-01", IP: netip.MustParseAddr("10.0.0.9")}},
	}.WithDefaults()
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; empty = valid
	}{
		{"valid", func(*Config) {}, ""},
		{"valid below 120s", func(c *Config) { c.Lifetimes6.Valid = 100 * time.Second }, "valid 1m40s below"},
		{"preferred above valid", func(c *Config) { c.Lifetimes6.Preferred = c.Lifetimes6.Valid + time.Second }, "preferred"},
		{"gateway outside", func(c *Config) { c.Networks[0].Gateway = netip.MustParseAddr("10.1.0.1") }, "gateway"},
		{"client outside", func(c *Config) { c.Clients[0].IP = netip.MustParseAddr("192.168.0.9") }, "outside served networks"},
		{"client on gateway", func(c *Config) { c.Clients[0].IP = netip.MustParseAddr("10.0.0.1") }, "gateway or broadcast"},
		{"duplicate MAC", func(c *Config) {
			c.Clients = append(c.Clients, Client{MAC: "AA:BB:CC:DD:EE:01", IP: netip.MustParseAddr("10.0.0.10")})
		}, "in use"},
		{"slice in reserved band", func(c *Config) { c.PD.Slices["v100"] = Slice{Index: 0, Size: 16} }, "outside the usable pool"},
		{"slice not power of two", func(c *Config) { c.PD.Slices["v100"] = Slice{Index: 16, Size: 12} }, "power of two"},
		{"pinned outside band", func(c *Config) { c.PD.Pinned[0].Prefix = netip.MustParsePrefix("2001:db8:a000:1000::/56") }, "reserved band"},
		{"slice without v6 network", func(c *Config) { c.Networks6 = nil }, "no served IPv6"},
		{"ra mtu below IPv6 minimum", func(c *Config) { c.RA.MTU = 1000 }, "mtu 1000"},
		{"ra mtu", func(c *Config) { c.RA.MTU = 1492 }, ""},
		{"cache threshold of a whole lease", func(c *Config) { c.Timers.CacheThreshold = 1 }, "cache threshold"},
		{"caching off", func(c *Config) { c.Timers.CacheThreshold = -1 }, ""},
		{"bad service PON", func(c *Config) {
			c.Services = []Service{{ID: "svc_1", PON: "0/1", IPv4: netip.MustParseAddr("10.0.0.20")}}
		}, "invalid PON"},
	} {
		c := valid()
		tc.mod(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestDerivedPool(t *testing.T) {
	n := Network6{Prefix: netip.MustParsePrefix("2001:db8:1::/64")}
	a, b, err := n.Pool()
	if err != nil || a.String() != "2001:db8:1::1000" || b.String() != "2001:db8:1::ffff" {
		t.Errorf("Pool() = %v %v %v, want ::1000 ::ffff", a, b, err)
	}
}

func TestNormalizeMAC(t *testing.T) {
	for _, in := range []string{"aa-bb-cc-dd-ee-ff", "aabbccddeeff", "AA:BB:CC:DD:EE:FF"} {
		if got, err := NormalizeMAC(in); err != nil || got != "AA:BB:CC:DD:EE:FF" {
			t.Errorf("NormalizeMAC(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"aa:bb", "AA:BB:CC:DD:EE:FG", "AA:BB:CC:DD:EE:F", "AA:BB:CC:DD:EE:FFF"} {
		if got, err := NormalizeMAC(bad); err == nil {
			t.Errorf("NormalizeMAC(%q) = %q, accepted", bad, got)
		}
	}
	// Already canonical: returned as it is.
	if got, err := NormalizeMAC("02:0A:FF:00:9B:C1"); err != nil || got != "02:0A:FF:00:9B:C1" {
		t.Errorf("canonical MAC: %q %v", got, err)
	}
}

func TestPrefixIndexRoundTrip(t *testing.T) {
	pool := netip.MustParsePrefix("2001:db8:a000::/36")
	for _, i := range []uint64{0, 1, 4095, 1<<20 - 1} {
		p := PrefixAt(pool, 56, i)
		if got := PrefixIndex(pool, 56, p); got != i || !pool.Contains(p.Addr()) {
			t.Errorf("PrefixAt(%d) = %v, index back %d", i, p, got)
		}
	}
}
