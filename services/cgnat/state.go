package cgnat

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/cgnat/nft"
	"routerd.dev/services/cgnat/slot"
	"routerd.dev/shared/store"
)

// Config is the stored CGNAT configuration (/router/cgnat/config).
type Config struct {
	Enabled   bool     `json:"enabled"`
	Iface     string   `json:"iface"`
	Pool      string   `json:"pool"`
	PortMin   int      `json:"port_min"`
	PortMax   int      `json:"port_max"`
	BlockSize int      `json:"block_size"`
	Exempt    []string `json:"exempt"`
}

// Defaults of Document 2's Limits.
func defaultConfig() Config {
	return Config{PortMin: 1024, PortMax: 65535, BlockSize: 2048, Exempt: []string{}}
}

// Sub is a subscriber's stored slot (/router/cgnat/slots/<MAC>): the slot
// stays with the MAC for as long as the client exists.
type Sub struct {
	MAC      string `json:"mac"`
	IP       string `json:"ip"`
	Hostname string `json:"hostname"`
	Iface    string `json:"iface,omitempty"`
	Slot     int    `json:"slot"`
	Assigned string `json:"assigned"`
}

const timeFormat = "2006-01-02 15:04:05"

func (s *Service) keyConfig() string         { return s.base.Key("config") }
func (s *Service) keySlot(mac string) string { return s.base.Key("slots", mac) }
func (s *Service) keyPool(iface string) string {
	return s.base.Key("nat", iface)
}
func (s *Service) keyForward(f api.Forward) string {
	return s.base.Key("forwards", forwardID(f.Proto, f.PublicIP, f.PublicPort))
}

func forwardID(proto, ip string, port int) string {
	if ip == "" {
		ip = "any"
	}
	return fmt.Sprintf("%s~%s~%d", proto, ip, port)
}

// load reads the whole stored state into memory.
func (s *Service) load(ctx context.Context) error {
	cfg, _, err := store.Get[Config](ctx, s.base, s.keyConfig())
	if errors.Is(err, store.ErrNotFound) {
		cfg, err = defaultConfig(), nil
	}
	if err != nil {
		return err
	}
	plan, exempt, err := buildPlan(cfg)
	if err != nil {
		return fmt.Errorf("stored configuration: %w", err)
	}
	subs, err := store.List[Sub](ctx, s.base, s.base.Key("slots")+"/")
	if err != nil {
		return err
	}
	pools, err := store.List[api.NATPool](ctx, s.base, s.base.Key("nat")+"/")
	if err != nil {
		return err
	}
	fwds, err := store.List[api.Forward](ctx, s.base, s.base.Key("forwards")+"/")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg, s.plan, s.exempt = cfg, plan, exempt
	s.subs, s.bySlot, s.alloc = map[string]*Sub{}, map[int]*Sub{}, slot.Alloc{}
	s.waiting = map[string]api.Client{}
	s.untranslated = map[string]api.Client{}
	for _, it := range subs {
		sub := it.Value
		if !s.alloc.Take(sub.Slot) {
			// Two records claim one slot (only a hand-edited store): the
			// later MAC waits for a new one.
			s.waiting[sub.MAC] = api.Client{MAC: sub.MAC, IP: sub.IP, Hostname: sub.Hostname, Iface: sub.Iface}
			continue
		}
		s.subs[sub.MAC], s.bySlot[sub.Slot] = &sub, &sub
	}
	s.pools = map[string]api.NATPool{}
	for _, it := range pools {
		s.pools[it.Value.Iface] = it.Value
	}
	s.forwards = map[string]api.Forward{}
	for _, it := range fwds {
		f := it.Value
		s.forwards[forwardID(f.Proto, f.PublicIP, f.PublicPort)] = f
	}
	s.nearlyFull = s.assignedLocked() > s.plan.Capacity()*9/10 && s.plan.Capacity() > 0
	return nil
}

// buildPlan makes the slot plan and exempt networks of a configuration.
func buildPlan(c Config) (*slot.Plan, []netip.Prefix, error) {
	var addrs []netip.Addr
	if c.Pool != "" {
		var err error
		if addrs, err = slot.ParsePool([]string{c.Pool}); err != nil {
			return nil, nil, err
		}
	}
	p, err := slot.New(addrs, c.PortMin, c.PortMax, c.BlockSize)
	if err != nil {
		return nil, nil, err
	}
	var ex []netip.Prefix
	for _, e := range c.Exempt {
		pf, err := netip.ParsePrefix(e)
		if err != nil {
			return nil, nil, fmt.Errorf("exempt %q: %w", e, err)
		}
		ex = append(ex, pf.Masked())
	}
	return p, ex, nil
}

// mapping is the public side of a subscriber now; false when it has none
// (CGNAT off, its slot past the capacity, its address not IPv4).
func (s *Service) mappingLocked(sub *Sub) (nft.Element, slot.Mapping, bool) {
	if !s.cfg.Enabled {
		return nft.Element{}, slot.Mapping{}, false
	}
	m, ok := s.plan.Slot(sub.Slot)
	priv, err := netip.ParseAddr(sub.IP)
	if !ok || err != nil || !priv.Is4() {
		return nft.Element{}, slot.Mapping{}, false
	}
	return nft.Element{Private: priv, Public: m.Public, PortStart: uint16(m.PortStart), PortEnd: uint16(m.PortEnd)}, m, true
}

func (s *Service) assignedLocked() int { return s.alloc.UsedBelow(s.plan.Capacity()) }

// desiredRules are the table's rules for the state, per chain, in order.
func (s *Service) desiredRulesLocked() map[string][]nft.Rule {
	out := map[string][]nft.Rule{}
	if s.cfg.Enabled && s.cfg.Iface != "" {
		oif := nft.OifName(s.cfg.Iface)
		out[nft.ChainPost] = append(out[nft.ChainPost],
			nft.Rule{Chain: nft.ChainPost, ID: "cgnat exempt " + s.cfg.Iface, Exprs: nft.Join(oif, s.k.ExemptLookup(), nft.Accept())})
		for _, p := range []struct {
			name  string
			proto byte
		}{{"tcp", 6}, {"udp", 17}, {"icmp", 1}} {
			out[nft.ChainPost] = append(out[nft.ChainPost],
				nft.Rule{Chain: nft.ChainPost, ID: "cgnat " + p.name + " " + s.cfg.Iface, Exprs: nft.Join(oif, nft.L4(p.proto), s.k.SNATMap())})
		}
		// Every other protocol: the subscriber's address, ports untouched
		// (the rules above end the chain for theirs).
		out[nft.ChainPost] = append(out[nft.ChainPost],
			nft.Rule{Chain: nft.ChainPost, ID: "cgnat other " + s.cfg.Iface, Exprs: nft.Join(oif, s.k.SNATMapAddr())})
	}
	ifaces := make([]string, 0, len(s.pools))
	for i := range s.pools {
		ifaces = append(ifaces, i)
	}
	sort.Strings(ifaces)
	for _, i := range ifaces {
		p := s.pools[i]
		oif := nft.OifName(i)
		for _, e := range p.Exempt {
			pf, err := netip.ParsePrefix(e)
			if err != nil {
				continue
			}
			out[nft.ChainPost] = append(out[nft.ChainPost],
				nft.Rule{Chain: nft.ChainPost, ID: "nat " + i + " exempt " + pf.Masked().String(), Exprs: nft.Join(oif, nft.Saddr(pf), nft.Accept())})
		}
		first, _ := netip.ParseAddr(p.PoolStart)
		last, err := netip.ParseAddr(p.PoolEnd)
		if err != nil {
			last = first
		}
		out[nft.ChainPost] = append(out[nft.ChainPost],
			nft.Rule{Chain: nft.ChainPost, ID: "nat " + i + " " + first.String() + "-" + last.String(), Exprs: nft.Join(oif, nft.SNATRange(first, last))})
	}
	ids := make([]string, 0, len(s.forwards))
	for id := range s.forwards {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		f := s.forwards[id]
		if !s.appliedLocked(f) {
			continue
		}
		client, _ := netip.ParseAddr(f.ClientIP)
		proto := byte(6)
		if f.Proto == "udp" {
			proto = 17
		}
		dst := nft.DaddrLocal()
		if f.PublicIP != "" {
			a, _ := netip.ParseAddr(f.PublicIP)
			dst = nft.Daddr(netip.PrefixFrom(a, 32))
		}
		rid := "pf " + forwardText(f)
		out[nft.ChainPre] = append(out[nft.ChainPre], nft.Rule{Chain: nft.ChainPre, ID: rid,
			Exprs: nft.Join(dst, nft.L4(proto), nft.Dport(uint16(f.PublicPort)), nft.DNAT(client, uint16(f.ClientPort)))})
		out[nft.ChainFwd] = append(out[nft.ChainFwd], nft.Rule{Chain: nft.ChainFwd, ID: rid,
			Exprs: nft.Join(nft.Daddr(netip.PrefixFrom(client, 32)), nft.L4(proto), nft.Dport(uint16(f.ClientPort)), nft.CtDNAT(), nft.Accept())})
	}
	return out
}

func forwardText(f api.Forward) string {
	ip := f.PublicIP
	if ip == "" {
		ip = "any"
	}
	return fmt.Sprintf("%s %s:%d -> %s:%d", f.Proto, ip, f.PublicPort, f.ClientIP, f.ClientPort)
}

// appliedLocked says whether a forward is in the kernel: not while its
// client lies on a switched-off VLAN.
func (s *Service) appliedLocked(f api.Forward) bool {
	a, err := netip.ParseAddr(f.ClientIP)
	if err != nil {
		return false
	}
	for _, p := range s.disabledNets {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// desiredElemsLocked is the map's content for the state.
func (s *Service) desiredElemsLocked() map[netip.Addr]nft.Element {
	out := make(map[netip.Addr]nft.Element, len(s.subs))
	for _, sub := range s.subs {
		if e, _, ok := s.mappingLocked(sub); ok {
			out[e.Private] = e
		}
	}
	return out
}

// Reconcile brings the kernel table to the stored state both ways: its
// rules (by identity), the exempt set and the map's elements. It returns
// how many rules and elements it changed.
func (s *Service) Reconcile(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconcileLocked()
}

func (s *Service) reconcileLocked() (int, error) {
	rules := s.desiredRulesLocked()
	elems := s.desiredElemsLocked()
	st, err := s.k.ReadExpecting(len(elems))
	if err != nil {
		return 0, err
	}
	if !st.Exists {
		var all []nft.Rule
		for _, ch := range []string{nft.ChainPost, nft.ChainPre, nft.ChainFwd} {
			all = append(all, rules[ch]...)
		}
		list := make([]nft.Element, 0, len(elems))
		for _, e := range elems {
			list = append(list, e)
		}
		return len(all) + len(list), s.k.Create(all, s.exempt, list)
	}
	b := nft.Batch{Exempt: &s.exempt}
	for _, ch := range []string{nft.ChainPost, nft.ChainPre, nft.ChainFwd} {
		diffRules(ch, st.Rules[ch], rules[ch], &b)
	}
	for priv, have := range st.Elems {
		want, ok := elems[priv]
		if !ok || want != have {
			b.DelElems = append(b.DelElems, priv)
		}
	}
	for priv, want := range elems {
		if have, ok := st.Elems[priv]; !ok || have != want {
			b.AddElems = append(b.AddElems, want)
		}
	}
	n := len(b.DelElems) + len(b.AddElems) + len(b.AddRules) + len(b.DelRules)
	return n, s.k.Apply(b)
}

// diffRules puts into b what turns the chain's rules have into want:
// rules no longer wanted are deleted, missing ones appended when the kept
// ones are in order before them; otherwise the chain's rules are replaced
// (in the same transaction).
func diffRules(chain string, have []nft.RuleRef, want []nft.Rule, b *nft.Batch) {
	wantIdx := map[string]int{}
	for i, r := range want {
		wantIdx[r.ID] = i
	}
	var kept []int
	seen := map[string]bool{}
	for _, h := range have {
		i, ok := wantIdx[h.ID]
		if !ok || seen[h.ID] {
			b.DelRules = append(b.DelRules, nft.Handle{Chain: chain, Handle: h.Handle})
			continue
		}
		seen[h.ID] = true
		kept = append(kept, i)
	}
	inOrder := slices.IsSorted(kept)
	// The missing ones must all come after the last kept one.
	last := -1
	if len(kept) > 0 {
		last = kept[len(kept)-1]
	}
	for i, r := range want {
		if !seen[r.ID] && i < last {
			inOrder = false
		}
	}
	if !inOrder {
		for _, h := range have {
			if seen[h.ID] {
				b.DelRules = append(b.DelRules, nft.Handle{Chain: chain, Handle: h.Handle})
			}
		}
		b.AddRules = append(b.AddRules, want...)
		return
	}
	for _, r := range want {
		if !seen[r.ID] {
			b.AddRules = append(b.AddRules, r)
		}
	}
}

// audit is the append-only CGNAT audit log: one line per assignment or
// release, `time action mac= private= public= ports= slot= host=`.
type audit struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func openAudit(path string) (*audit, error) {
	a := &audit{path: path}
	if path == "" {
		return a, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("cgnat: audit log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("cgnat: audit log: %w", err)
	}
	a.f = f
	return a, nil
}

// write appends one record. The line is written in one write(2) on an
// O_APPEND file, so concurrent writers never interleave within a line.
func (a *audit) write(t time.Time, action, mac, private, host string, m slot.Mapping) error {
	if a.f == nil {
		return nil
	}
	line := fmt.Sprintf("%s %s mac=%s private=%s public=%s ports=%d-%d slot=%d host=%s\n",
		t.UTC().Format(time.RFC3339Nano), action, mac, private, m.Public, m.PortStart, m.PortEnd, m.Slot, strings.Map(noSpace, host))
	a.mu.Lock()
	defer a.mu.Unlock()
	_, err := a.f.WriteString(line)
	return err
}

// noSpace keeps a hostname one field of the line.
func noSpace(r rune) rune {
	if r <= ' ' || r == 0x7f {
		return '_'
	}
	return r
}

func (a *audit) Close() {
	if a.f != nil {
		a.f.Close()
	}
}

// logMapping writes an assignment or release of sub to the audit log when
// it has a public mapping.
func (s *Service) logMappingLocked(action string, sub *Sub) {
	if _, m, ok := s.mappingLocked(sub); ok {
		if err := s.audit.write(s.deps.Now(), action, sub.MAC, sub.IP, sub.Hostname, m); err != nil {
			s.deps.Log.Error("CGNAT audit log not written", "err", err, "mac", sub.MAC)
		}
	}
}

// checkFullLocked publishes the "pool nearly full" alert when assigned
// passes 90% of the capacity (once per crossing).
func (s *Service) checkFullLocked() {
	capacity := s.plan.Capacity()
	assigned := s.assignedLocked()
	full := capacity > 0 && assigned*10 > capacity*9
	if full && !s.nearlyFull {
		s.pub.Publish(api.EventCGNATNearlyFull, nil, map[string]any{
			"type": "cgnat", "severity": "warning",
			"message":  fmt.Sprintf("CGNAT pool nearly full: %d of %d slots assigned", assigned, capacity),
			"assigned": assigned, "capacity": capacity, "free": capacity - assigned,
		})
	}
	s.nearlyFull = full
}
