// Package network is the router's own network configuration (Document 1,
// "Router network configuration"): the network document of ports and bonds,
// the rules a change must follow, the systemd-networkd files rendered from
// it, and its application to the kernel of the target namespace. The
// netcfg service stores the document in etcd and runs the timed apply
// (plan, apply, confirm, rollback) on top of this package.
package network

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"routerd.dev/proto/api"
)

// Config is the stored network document.
type Config = api.NetConfig

// DefaultMTU is the MTU a port or bond gets when its mtu is null.
const DefaultMTU = 1500

// MTU limits (Document 1, Limits).
const (
	MinMTU = 576
	MaxMTU = 9216
)

// Modes are the bond modes the spec allows.
var Modes = []string{"802.3ad", "active-backup", "balance-rr", "balance-xor", "balance-tlb", "balance-alb", "broadcast"}

// HashPolicies are the allowed transmit-hash-policy values.
var HashPolicies = []string{"layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4"}

var ifName = regexp.MustCompile(`^[A-Za-z0-9_.@:-]{1,15}$`)

// Normal returns c with its lists sorted by name and never nil, so that
// equal documents encode (and hash) equally.
func Normal(c Config) Config {
	out := Config{Ports: append([]api.NetPort{}, c.Ports...), Bonds: make([]api.NetBond, 0, len(c.Bonds))}
	for _, b := range c.Bonds {
		nb := b
		nb.Members = append([]string{}, b.Members...)
		nb.Params = map[string]any{}
		for k, v := range b.Params {
			if f, ok := v.(float64); ok {
				v = int(f)
			}
			nb.Params[k] = v
		}
		out.Bonds = append(out.Bonds, nb)
	}
	sort.Slice(out.Ports, func(i, j int) bool { return out.Ports[i].Name < out.Ports[j].Name })
	sort.Slice(out.Bonds, func(i, j int) bool { return out.Bonds[i].Name < out.Bonds[j].Name })
	return out
}

// Version is the short hash of a stored document.
func Version(c Config) string {
	raw, _ := json.Marshal(Normal(c))
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:6])
}

// Facts are what the rules need to know of the router beyond the document:
// the kernel's links and every interface's addresses and VLANs.
type Facts struct {
	// Links is every link of the namespace by name, with its kind
	// (port, bond, vlan, bmc, ifb, other).
	Links map[string]string
	// Addrs is every interface's addresses, live or stored, by interface.
	Addrs map[string][]string
	// VLANs is the VLANs (stored or live) on top of each interface.
	VLANs map[string][]string
}

// Problem is one broken rule of a change, naming the field.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p Problem) String() string { return p.Field + ": " + p.Message }

// Merge applies a change to cur and checks every field rule: the new
// document, what changes in words, and the problems (none when valid).
func Merge(cur Config, ch *api.NetworkChange, f Facts) (Config, []string, []Problem) {
	next := Normal(cur)
	var changes []string
	var probs []Problem
	bad := func(field, format string, a ...any) {
		probs = append(probs, Problem{Field: field, Message: fmt.Sprintf(format, a...)})
	}
	portIdx := func(c Config, name string) int {
		for i, p := range c.Ports {
			if p.Name == name {
				return i
			}
		}
		return -1
	}
	bondIdx := func(c Config, name string) int {
		for i, b := range c.Bonds {
			if b.Name == name {
				return i
			}
		}
		return -1
	}
	// Ports, in name order so the changes read the same every time.
	for _, name := range sortedKeys(ch.Ports) {
		pc := ch.Ports[name]
		field := "ports." + name
		if !ifName.MatchString(name) {
			bad(field, "not an interface name")
			continue
		}
		i := portIdx(next, name)
		if i < 0 {
			kind, ok := f.Links[name]
			if !ok {
				bad(field, "no such port")
				continue
			}
			if kind != "port" {
				bad(field, "%s is a %s, not a port", name, kind)
				continue
			}
			if pc.Remove {
				bad(field+".remove", "%s is not managed", name)
				continue
			}
			next.Ports = append(next.Ports, api.NetPort{Name: name, Up: true})
			i = len(next.Ports) - 1
			changes = append(changes, "port "+name+": managed from now on")
		}
		p := &next.Ports[i]
		if pc.Remove {
			if b := bondOf(next, name); b != "" {
				bad(field+".remove", "%s is a member of %s", name, b)
			} else if len(f.Addrs[name]) > 0 {
				bad(field+".remove", "%s carries addresses (%s)", name, strings.Join(f.Addrs[name], ", "))
			} else if len(f.VLANs[name]) > 0 {
				bad(field+".remove", "%s has VLANs on it (%s)", name, strings.Join(f.VLANs[name], ", "))
			} else {
				next.Ports = append(next.Ports[:i], next.Ports[i+1:]...)
				changes = append(changes, "port "+name+": no longer managed (the kernel keeps it as it is)")
			}
			continue
		}
		if pc.Up != nil && *pc.Up != p.Up {
			p.Up = *pc.Up
			changes = append(changes, fmt.Sprintf("port %s: %s", name, map[bool]string{true: "up", false: "down"}[p.Up]))
		}
		if len(pc.MTU) > 0 {
			m, ok := mtuOf(pc.MTU)
			if !ok {
				bad(field+".mtu", "mtu must be %d-%d, or null for the default", MinMTU, MaxMTU)
			} else if !sameMTU(m, p.MTU) {
				changes = append(changes, fmt.Sprintf("port %s: mtu %s -> %s", name, mtuText(p.MTU), mtuText(m)))
				p.MTU = m
			}
		}
	}
	// Bonds.
	for _, name := range sortedKeys(ch.Bonds) {
		bc := ch.Bonds[name]
		field := "bonds." + name
		if !ifName.MatchString(name) {
			bad(field, "not an interface name")
			continue
		}
		i := bondIdx(next, name)
		if bc.Remove {
			if i < 0 {
				bad(field+".remove", "%s is not a configured bond", name)
				continue
			}
			if len(f.VLANs[name]) > 0 {
				bad(field+".remove", "%s has VLANs on it (%s)", name, strings.Join(f.VLANs[name], ", "))
				continue
			}
			if len(f.Addrs[name]) > 0 {
				bad(field+".remove", "%s carries addresses (%s)", name, strings.Join(f.Addrs[name], ", "))
				continue
			}
			next.Bonds = append(next.Bonds[:i], next.Bonds[i+1:]...)
			changes = append(changes, "bond "+name+": deleted (members released)")
			continue
		}
		if i < 0 {
			if k, ok := f.Links[name]; ok && k != "bond" {
				bad(field, "%s exists and is a %s", name, k)
				continue
			}
			if portIdx(next, name) >= 0 {
				bad(field, "%s is a port", name)
				continue
			}
			if bc.Mode == "" {
				bad(field+".mode", "a new bond needs a mode (%s)", strings.Join(Modes, ", "))
			}
			if len(bc.Members) == 0 {
				bad(field+".members", "a new bond needs at least one member")
			}
			next.Bonds = append(next.Bonds, api.NetBond{Name: name, Members: []string{}, Params: map[string]any{}})
			i = len(next.Bonds) - 1
			changes = append(changes, "bond "+name+": created")
		}
		b := &next.Bonds[i]
		if bc.Mode != "" && bc.Mode != b.Mode {
			if !contains(Modes, bc.Mode) {
				bad(field+".mode", "mode %q: want one of %s", bc.Mode, strings.Join(Modes, ", "))
			} else {
				if b.Mode != "" {
					changes = append(changes, fmt.Sprintf("bond %s: mode %s -> %s", name, b.Mode, bc.Mode))
				} else {
					changes = append(changes, fmt.Sprintf("bond %s: mode %s", name, bc.Mode))
				}
				b.Mode = bc.Mode
			}
		}
		if bc.Members != nil {
			if len(bc.Members) == 0 {
				bad(field+".members", "at least one member")
			}
			seen := map[string]bool{}
			ok := true
			for _, m := range bc.Members {
				mf := field + ".members"
				switch {
				case seen[m]:
					bad(mf, "%s is listed twice", m)
					ok = false
				case portIdx(next, m) < 0:
					bad(mf, "%s is not a configured port", m)
					ok = false
				case bondOf(next, m) != "" && bondOf(next, m) != name:
					bad(mf, "%s is a member of %s", m, bondOf(next, m))
					ok = false
				case len(f.Addrs[m]) > 0:
					bad(mf, "%s carries addresses (%s)", m, strings.Join(f.Addrs[m], ", "))
					ok = false
				case len(f.VLANs[m]) > 0:
					bad(mf, "%s carries VLANs (%s)", m, strings.Join(f.VLANs[m], ", "))
					ok = false
				}
				seen[m] = true
			}
			if ok && strings.Join(bc.Members, ",") != strings.Join(b.Members, ",") {
				changes = append(changes, fmt.Sprintf("bond %s: members %s -> %s", name, listText(b.Members), listText(bc.Members)))
				b.Members = append([]string{}, bc.Members...)
			}
		}
		for _, k := range sortedKeys(bc.Params) {
			v := bc.Params[k]
			pf := field + ".params." + k
			old, had := b.Params[k]
			if v == nil {
				if had {
					delete(b.Params, k)
					changes = append(changes, fmt.Sprintf("bond %s: %s reset (was %v)", name, k, old))
				}
				continue
			}
			nv, err := param(k, v)
			if err != "" {
				bad(pf, "%s", err)
				continue
			}
			if !had || fmt.Sprint(old) != fmt.Sprint(nv) {
				b.Params[k] = nv
				changes = append(changes, fmt.Sprintf("bond %s: %s %v", name, k, nv))
			}
		}
		if _, ok := b.Params["lacp-rate"]; ok && b.Mode != "" && b.Mode != "802.3ad" {
			bad(field+".params.lacp-rate", "lacp-rate is for mode 802.3ad only (mode is %s)", b.Mode)
		}
		if len(bc.MTU) > 0 {
			m, ok := mtuOf(bc.MTU)
			if !ok {
				bad(field+".mtu", "mtu must be %d-%d, or null for the default", MinMTU, MaxMTU)
			} else if !sameMTU(m, b.MTU) {
				changes = append(changes, fmt.Sprintf("bond %s: mtu %s -> %s", name, mtuText(b.MTU), mtuText(m)))
				b.MTU = m
			}
		}
	}
	return Normal(next), changes, probs
}

// param checks one bond parameter and returns its stored value.
func param(k string, v any) (any, string) {
	switch k {
	case "lacp-rate":
		s, _ := v.(string)
		if s != "slow" && s != "fast" {
			return nil, "lacp-rate must be slow or fast"
		}
		return s, ""
	case "transmit-hash-policy":
		s, _ := v.(string)
		if !contains(HashPolicies, s) {
			return nil, "transmit-hash-policy must be one of " + strings.Join(HashPolicies, ", ")
		}
		return s, ""
	case "mii-monitor-interval":
		var n float64
		switch x := v.(type) {
		case float64:
			n = x
		case int:
			n = float64(x)
		case string:
			if _, err := fmt.Sscanf(x, "%g", &n); err != nil {
				return nil, "mii-monitor-interval must be a whole number 0-10000"
			}
		default:
			return nil, "mii-monitor-interval must be a whole number 0-10000"
		}
		if n != float64(int(n)) || n < 0 || n > 10000 {
			return nil, "mii-monitor-interval must be a whole number 0-10000"
		}
		return int(n), ""
	}
	return nil, fmt.Sprintf("unknown parameter %q: only lacp-rate, transmit-hash-policy, mii-monitor-interval", k)
}

// Members lists every port that is a bond member, with its bond.
func Members(c Config) map[string]string {
	out := map[string]string{}
	for _, b := range c.Bonds {
		for _, m := range b.Members {
			out[m] = b.Name
		}
	}
	return out
}

func bondOf(c Config, port string) string { return Members(c)[port] }

func mtuOf(raw json.RawMessage) (*int, bool) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" || string(raw) == `""` {
		return nil, true
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil || func() bool { _, e := fmt.Sscanf(s, "%g", &n); return e != nil }() {
			return nil, false
		}
	}
	if n != float64(int(n)) || n < MinMTU || n > MaxMTU {
		return nil, false
	}
	m := int(n)
	return &m, true
}

func sameMTU(a, b *int) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func mtuText(m *int) string {
	if m == nil {
		return "default"
	}
	return fmt.Sprint(*m)
}

func listText(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ",")
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Report is the stored document before and after as a line diff.
func Report(before, after Config) string {
	a, _ := json.MarshalIndent(Normal(before), "", "  ")
	b, _ := json.MarshalIndent(Normal(after), "", "  ")
	return lineDiff(strings.Split(string(a), "\n"), strings.Split(string(b), "\n"))
}

// lineDiff is a small unified-style diff (longest common subsequence;
// documents are a few hundred lines at most).
func lineDiff(a, b []string) string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	sb.WriteString("--- stored\n+++ planned\n")
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			sb.WriteString("  " + a[i] + "\n")
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			sb.WriteString("+ " + b[j] + "\n")
			j++
		default:
			sb.WriteString("- " + a[i] + "\n")
			i++
		}
	}
	return sb.String()
}
