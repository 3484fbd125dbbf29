package conf

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Options are what the rendering needs beside the settings.
type Options struct {
	// Log is the file BIRD logs to; empty logs to stderr.
	Log string
	// RTR is the RPKI cache (host:port) used while rpki is on.
	RTR string
	// Open gives a sealed password in clear, for the configuration file.
	// Nil or Mask renders asterisks.
	Open func(peer, sealed string) (string, error)
	// Mask renders passwords as asterisks (GET /bgp?config=1).
	Mask bool
}

// ProtoName is the BIRD protocol name of a peer: "bgp_" and the name with
// "_" doubled and "-" as "_h", so that distinct peer names never collide
// and every name is a BIRD symbol.
func ProtoName(peer string) string {
	r := strings.NewReplacer("_", "__", "-", "_h")
	return "bgp_" + r.Replace(peer)
}

// Static protocol names, matched in filters.
const (
	ProtoAnnounce4  = "announce4"
	ProtoAnnounce6  = "announce6"
	ProtoBlackhole4 = "blackhole4"
	ProtoBlackhole6 = "blackhole6"
	ProtoOSPF       = "ospf4"
	ProtoOSPF6      = "ospf6"
	ProtoRPKI       = "rpki1"
	ProtoBFD        = "bfd1"
)

// RPKIRefresh is how often BIRD asks the RTR cache for news; data older
// than two of these is stale.
const RPKIRefresh = 600 * time.Second

func quote(s string) string {
	// BIRD's strings have no escapes: a double quote becomes a single one
	// (passwords with one are refused before they get here).
	return `"` + strings.NewReplacer(`"`, `'`, "\n", " ", "\r", " ").Replace(s) + `"`
}

// Render writes BIRD 2's configuration for s. Every peer's password is
// opened with o.Open (or masked).
func Render(s Settings, o Options) (string, error) {
	s.Normal()
	var b strings.Builder
	w := func(f string, a ...any) { fmt.Fprintf(&b, f, a...); b.WriteByte('\n') }
	w("# routerd routing service: generated from /router/routing/settings; do not edit.")
	if o.Log != "" {
		w("log %s { info, remote, warning, error, auth, fatal, bug };", quote(o.Log))
	} else {
		w("log stderr { info, remote, warning, error, auth, fatal, bug };")
	}
	rid := s.RouterID
	if rid == "" {
		rid = "0.0.0.1" // BGP and OSPF are off without one (Problems)
	}
	w("router id %s;", rid)
	w("timeformat protocol iso long;")
	w("timeformat route iso long;")
	w("")
	w("define OWN_AS = %d;", max(s.ASN, 1))
	w("")
	w("function is_bogon4() {\n  return net ~ [ %s ];\n}", plus(BogonsV4))
	w("function is_bogon6() {\n  return net ~ [ %s ];\n}", plus(BogonsV6))
	w("")
	rpki := s.Enabled && s.RPKI
	if rpki {
		host, port := splitHostPort(o.RTR)
		w("roa4 table rpki4;")
		w("roa6 table rpki6;")
		w("protocol rpki %s {", ProtoRPKI)
		w("  roa4 { table rpki4; };")
		w("  roa6 { table rpki6; };")
		w("  remote %s port %s;", quote(host), port)
		w("  retry keep 30;")
		w("  refresh keep %d;", int(RPKIRefresh.Seconds()))
		w("  expire keep 7200;")
		w("}")
		w("")
	}
	w("protocol device { scan time 10; }")
	w("")
	for _, fam := range []string{"4", "6"} {
		w("protocol kernel kernel%s {", fam)
		w("  metric %d;", s.KernelMetric)
		w("  ipv%s {", fam)
		w("    import none;")
		w("    export filter {")
		w("      if proto = %q then accept;", "blackhole"+fam)
		w("      if source ~ [ RTS_BGP, RTS_OSPF, RTS_OSPF_IA, RTS_OSPF_EXT1, RTS_OSPF_EXT2 ] then accept;")
		w("      reject;")
		w("    };")
		w("  };")
		w("}")
		w("")
	}
	var ann4, ann6, bh4, bh6 []string
	for _, p := range s.Announce {
		if strings.Contains(p, ":") {
			ann6 = append(ann6, p)
		} else {
			ann4 = append(ann4, p)
		}
	}
	for _, a := range s.Blackhole {
		if strings.Contains(a, ":") {
			bh6 = append(bh6, a+"/128")
		} else {
			bh4 = append(bh4, a+"/32")
		}
	}
	static := func(name, fam string, routes []string) {
		w("protocol static %s {", name)
		w("  ipv%s;", fam)
		for _, r := range routes {
			w("  route %s blackhole;", r)
		}
		w("}")
	}
	static(ProtoAnnounce4, "4", ann4)
	static(ProtoAnnounce6, "6", ann6)
	static(ProtoBlackhole4, "4", bh4)
	static(ProtoBlackhole6, "6", bh6)
	w("")

	anyBFD := false
	for i := range s.Peers {
		p := &s.Peers[i]
		if err := renderPeer(w, s, p, rpki, o); err != nil {
			return "", err
		}
		anyBFD = anyBFD || (p.BFD && p.Enabled)
	}
	if s.Enabled && anyBFD {
		w("protocol bfd %s {", ProtoBFD)
		w("  interface \"*\" { min rx interval 100 ms; min tx interval 100 ms; multiplier 5; };")
		w("  multihop { min rx interval 200 ms; min tx interval 200 ms; multiplier 5; };")
		w("}")
		w("")
	}
	if s.OSPF.Enabled {
		renderOSPF(w, s)
	}
	return b.String(), nil
}

func renderPeer(w func(string, ...any), s Settings, p *Peer, rpki bool, o Options) error {
	name := ProtoName(p.Name)
	a, err := netip.ParseAddr(p.IP)
	if err != nil {
		return fmt.Errorf("peer %s: bad address %q", p.Name, p.IP)
	}
	fam := "4"
	dflt := "0.0.0.0/0"
	maxLen := 24
	if a.Is6() {
		fam, dflt, maxLen = "6", "::/0", 48
	}
	upstream := p.Type != "ibgp"
	backup := upstream && p.Role == "backup"

	// Import.
	w("filter in_%s {", name)
	if upstream && p.Routes != "full" {
		w("  if net != %s then reject;", dflt)
	} else {
		w("  if is_bogon%s() then reject;", fam)
		w("  if net.len > %d then reject;", maxLen)
		if rpki && upstream {
			w("  if roa_check(rpki%s, net, bgp_path.last_nonaggregated) = ROA_INVALID then reject;", fam)
		}
	}
	if backup {
		w("  bgp_local_pref = 50;")
	}
	w("  accept;")
	w("}")
	// Export.
	w("filter out_%s {", name)
	w("  if proto = %q then {", "blackhole"+fam)
	w("    bgp_community.add((65535, 666));")
	if upstream && p.BlackholeCommunity != "" {
		as, n, _ := strings.Cut(p.BlackholeCommunity, ":")
		w("    bgp_community.add((%s, %s));", as, n)
	}
	w("    bgp_community.add((65535, 65281));")
	w("    accept;")
	w("  }")
	w("  if proto = %q then {", "announce"+fam)
	if backup {
		w("    bgp_path.prepend(OWN_AS);")
		w("    bgp_path.prepend(OWN_AS);")
	}
	w("    accept;")
	w("  }")
	if !upstream {
		w("  if source = RTS_BGP then accept;")
	}
	w("  reject;")
	w("}")

	w("protocol bgp %s {", name)
	if p.Description != "" {
		w("  description %s;", quote(p.Description))
	}
	if !s.Enabled || !p.Enabled {
		w("  disabled;")
	}
	w("  local as OWN_AS;")
	w("  neighbor %s as %d;", a, p.ASN)
	if p.Multihop > 0 {
		w("  multihop %d;", p.Multihop)
	} else {
		w("  direct;")
	}
	if p.Password != "" {
		pw := "********"
		if !o.Mask && o.Open != nil {
			if pw, err = o.Open(p.Name, p.Password); err != nil {
				return fmt.Errorf("peer %s: password: %w", p.Name, err)
			}
		}
		w("  password %s;", quote(pw))
	}
	if p.BFD {
		w("  bfd on;")
	}
	mp := EffectiveMaxPrefix(p)
	w("  ipv%s {", fam)
	w("    import keep filtered on;")
	w("    import filter in_%s;", name)
	w("    export filter out_%s;", name)
	w("    receive limit %d action restart;", mp)
	if !upstream {
		w("    next hop self;")
	}
	w("  };")
	w("}")
	w("")
	return nil
}

// renderOSPF writes OSPFv2 (IPv4, ospf4) and OSPFv3 (IPv6, ospf6) on the
// same interfaces, area and default-route rules.
func renderOSPF(w func(string, ...any), s Settings) {
	o := s.OSPF
	for _, v := range []struct{ ver, fam, proto, dflt string }{
		{"v2", "4", ProtoOSPF, "0.0.0.0/0"},
		{"v3", "6", ProtoOSPF6, "::/0"},
	} {
		if o.OriginateDefault {
			w("protocol static ospf_default%s {", v.fam)
			w("  ipv%s { preference 1; };", v.fam)
			w("  route %s unreachable;", v.dflt)
			w("}")
		}
		w("protocol ospf %s %s {", v.ver, v.proto)
		w("  ipv%s {", v.fam)
		if o.AcceptDefault {
			w("    import all;")
		} else {
			w("    import filter { if net = %s then reject; accept; };", v.dflt)
		}
		if o.OriginateDefault {
			// The best default this router has (from BGP, or the static
			// fallback), never one OSPF itself brought.
			w("    export filter { if net = %s then accept; reject; };", v.dflt)
		} else {
			w("    export none;")
		}
		w("  };")
		w("  area %s {", o.Area)
		for _, i := range o.Interfaces {
			w("    interface %s {", quote(i.Name))
			w("      cost %d;", i.Cost)
			if i.Passive {
				w("      stub yes;")
			}
			w("    };")
		}
		w("  };")
		w("}")
		w("")
	}
}

func plus(list []string) string {
	out := make([]string, len(list))
	for i, p := range list {
		out[i] = p + "+"
	}
	return strings.Join(out, ", ")
}

func splitHostPort(s string) (string, string) {
	if s == "" {
		return "127.0.0.1", "8282"
	}
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return s, "8282"
	}
	return strings.Trim(s[:i], "[]"), s[i+1:]
}
