package cgnat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Document is the cgnat service's configuration document.
const Document = "etc/cgnat.json"

// document is etc/cgnat.json: the CGNAT settings, the NAT pools and the
// port forwards. Slots are state (they follow the clients), not in it.
type document struct {
	CGNAT    Config        `json:"cgnat"`
	NAT      []api.NATPool `json:"nat"`
	Forwards []api.Forward `json:"forwards"`
}

// Export renders the stored configuration as etc/cgnat.json
// (cgnat.config.export).
func (s *Service) Export(ctx context.Context, _ *api.None) (*api.ConfigDocuments, error) {
	broken := func(err error) error {
		var be *store.BrokenError
		if errors.As(err, &be) {
			return apierr.Broken([]string{Document})
		}
		return err
	}
	cfg, _, err := store.Get[Config](ctx, s.base, s.keyConfig())
	if errors.Is(err, store.ErrNotFound) {
		cfg, err = defaultConfig(), nil
	}
	if err != nil {
		return nil, broken(err)
	}
	pools, err := store.List[api.NATPool](ctx, s.base, s.base.Key("nat")+"/")
	if err != nil {
		return nil, broken(err)
	}
	fwds, err := store.List[api.Forward](ctx, s.base, s.base.Key("forwards")+"/")
	if err != nil {
		return nil, broken(err)
	}
	doc := document{CGNAT: cfg, NAT: []api.NATPool{}, Forwards: []api.Forward{}}
	if doc.CGNAT.Exempt == nil {
		doc.CGNAT.Exempt = []string{}
	}
	for _, p := range pools {
		doc.NAT = append(doc.NAT, p.Value)
	}
	for _, f := range fwds {
		f.Value.Applied = false
		doc.Forwards = append(doc.Forwards, f.Value)
	}
	out, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		return nil, err
	}
	return &api.ConfigDocuments{Documents: map[string]string{Document: string(out) + "\n"}}, nil
}

var ifaceRe = regexp.MustCompile(`^[A-Za-z0-9_.@:-]{1,15}$`)

// check validates a document as the operations would.
func (d *document) check() []string {
	var probs []string
	bad := func(f string, a ...any) { probs = append(probs, fmt.Sprintf(f, a...)) }
	c := &d.CGNAT
	if _, _, err := buildPlan(*c); err != nil {
		bad("cgnat: %v", err)
	}
	if c.Enabled && (c.Iface == "" || c.Pool == "") {
		bad("cgnat: enabled needs iface and a non-empty pool")
	}
	if c.Iface != "" && !ifaceRe.MatchString(c.Iface) {
		bad("cgnat: invalid iface %q", c.Iface)
	}
	seen := map[string]bool{}
	for i, p := range d.NAT {
		a, err1 := netip.ParseAddr(p.PoolStart)
		b, err2 := netip.ParseAddr(p.PoolEnd)
		if !ifaceRe.MatchString(p.Iface) || err1 != nil || err2 != nil || !a.Is4() || !b.Is4() || b.Less(a) || seen[p.Iface] {
			bad("nat[%d]: invalid or duplicate pool %s %s-%s", i, p.Iface, p.PoolStart, p.PoolEnd)
		}
		seen[p.Iface] = true
		for _, e := range p.Exempt {
			if pf, err := netip.ParsePrefix(e); err != nil || !pf.Addr().Is4() {
				bad("nat[%d]: invalid exempt network %q", i, e)
			}
		}
	}
	ids := map[string]bool{}
	for i, f := range d.Forwards {
		c, err := netip.ParseAddr(f.ClientIP)
		okPub := f.PublicIP == ""
		if !okPub {
			p, err := netip.ParseAddr(f.PublicIP)
			okPub = err == nil && p.Is4()
		}
		id := forwardID(f.Proto, f.PublicIP, f.PublicPort)
		if (f.Proto != "tcp" && f.Proto != "udp") || !okPub || err != nil || !c.Is4() || f.PublicPort < 1 || f.PublicPort > 65535 ||
			f.ClientPort < 1 || f.ClientPort > 65535 || ids[id] {
			bad("forwards[%d]: invalid or duplicate forward %s", i, forwardText(f))
		}
		ids[id] = true
	}
	return probs
}

// Import replaces the configuration with etc/cgnat.json
// (cgnat.config.import) in one etcd transaction, then reconciles the
// kernel. Without the document nothing changes; a document that does not
// parse or validate is a 400 and nothing changes.
func (s *Service) Import(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	text, ok := in.Documents[Document]
	if !ok {
		return &api.ConfigImported{Documents: []string{}}, nil
	}
	var d document
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, apierr.Invalid("documents", "%s does not parse: %v", Document, err).With("broken_data_files", []string{Document})
	}
	if d.CGNAT.PortMin == 0 && d.CGNAT.PortMax == 0 && d.CGNAT.BlockSize == 0 {
		def := defaultConfig()
		d.CGNAT.PortMin, d.CGNAT.PortMax, d.CGNAT.BlockSize = def.PortMin, def.PortMax, def.BlockSize
	}
	if d.CGNAT.Exempt == nil {
		d.CGNAT.Exempt = []string{}
	}
	if probs := d.check(); len(probs) > 0 {
		return nil, apierr.Invalid("documents", "%s: %s", Document, strings.Join(probs, "; ")).With("problems", probs)
	}
	if 1+2*(len(d.NAT)+len(d.Forwards)) > 120 {
		return nil, apierr.Invalid("documents", "%s: more than 59 pools and forwards do not fit one etcd transaction", Document)
	}
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	// etcd refuses a put under a prefix the same transaction deletes:
	// the keys the document drops are deleted one by one.
	oldPools, err := store.List[api.NATPool](ctx, s.base, s.base.Key("nat")+"/")
	if err != nil {
		return nil, err
	}
	oldFwds, err := store.List[api.Forward](ctx, s.base, s.base.Key("forwards")+"/")
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	t := st.Txn().Put(s.keyConfig(), d.CGNAT)
	sort.Slice(d.NAT, func(i, j int) bool { return d.NAT[i].Iface < d.NAT[j].Iface })
	for _, p := range d.NAT {
		if p.Exempt == nil {
			p.Exempt = []string{}
		}
		keep[s.keyPool(p.Iface)] = true
		t.Put(s.keyPool(p.Iface), p)
	}
	for _, f := range d.Forwards {
		f.Applied = false
		keep[s.keyForward(f)] = true
		t.Put(s.keyForward(f), f)
	}
	for _, it := range oldPools {
		if !keep[it.Key] {
			t.Delete(it.Key)
		}
	}
	for _, it := range oldFwds {
		if !keep[it.Key] {
			t.Delete(it.Key)
		}
	}
	if _, err := t.Commit(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	waiting := s.waiting
	s.mu.Unlock()
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	for mac, c := range waiting {
		if _, has := s.subs[mac]; !has {
			s.waiting[mac] = c
		}
	}
	s.mu.Unlock()
	if _, err := s.Reconcile(ctx); err != nil {
		return nil, apierr.Internal(err.Error(), "%s stored but not applied to the kernel", Document)
	}
	s.mu.Lock()
	s.fillLocked(ctx)
	s.checkFullLocked()
	s.mu.Unlock()
	return &api.ConfigImported{Documents: []string{Document}}, nil
}
