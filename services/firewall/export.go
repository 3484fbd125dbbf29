package firewall

import (
	"context"
	"encoding/json"
	"net/netip"
	"sort"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Document is the firewall's configuration document.
const Document = "etc/firewall.json"

// document is etc/firewall.json: the allow-list and the anti-spoofing
// settings.
type document struct {
	Protect   []api.ProtectEntry `json:"protect"`
	Antispoof SpoofSettings      `json:"antispoof"`
}

// Export renders the configuration (firewall.config.export).
func (s *Service) Export(ctx context.Context, _ *api.None) (*api.ConfigDocuments, error) {
	items, err := store.List[allowRec](ctx, s.st, s.st.Key("protect")+"/")
	if err != nil {
		return nil, err
	}
	st, _, err := store.Get[SpoofSettings](ctx, s.st, s.spoof.key())
	if err != nil && err != store.ErrNotFound {
		return nil, err
	}
	if err == store.ErrNotFound {
		st = SpoofSettings{Mode: "strict"}
	}
	d := document{Protect: []api.ProtectEntry{}, Antispoof: st}
	for _, it := range items {
		d.Protect = append(d.Protect, it.Value)
	}
	if d.Antispoof.Exempt == nil {
		d.Antispoof.Exempt = []string{}
	}
	if d.Antispoof.Overrides == nil {
		d.Antispoof.Overrides = map[string]string{}
	}
	out, err := json.MarshalIndent(d, "", "    ")
	if err != nil {
		return nil, err
	}
	return &api.ConfigDocuments{Documents: map[string]string{Document: string(out) + "\n"}}, nil
}

// Import replaces the allow-list and the anti-spoofing settings with the
// document's in one etcd transaction, then writes both tables again
// (firewall.config.import). Without the document nothing changes; a
// document that does not parse or holds an invalid entry is a 400 and
// nothing changes.
func (s *Service) Import(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	raw, ok := in.Documents[Document]
	if !ok {
		return &api.ConfigImported{Documents: []string{}}, nil
	}
	var d document
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, apierr.Invalid("documents", "%s does not parse: %v", Document, err).With("broken_data_files", []string{Document})
	}
	var probs []string
	allow := map[netip.Prefix]allowRec{}
	for _, e := range d.Protect {
		p, err := parseNetwork(e.Network)
		if err != nil {
			probs = append(probs, "protect: "+e.Network+" is not an IPv4 network")
			continue
		}
		if _, dup := allow[p]; dup {
			probs = append(probs, "protect: "+p.String()+" twice")
		}
		e.Network = p.String()
		allow[p] = e
	}
	a := d.Antispoof
	if a.Mode == "" {
		a.Mode = "strict"
	}
	if a.Mode != "strict" && a.Mode != "dynamic" {
		probs = append(probs, "antispoof: mode "+a.Mode+" is not strict or dynamic")
	}
	if ex, err := parseExempt(a.Exempt); err != nil {
		probs = append(probs, "antispoof: "+err.Error())
	} else {
		a.Exempt = ex
	}
	if a.Overrides == nil {
		a.Overrides = map[string]string{}
	}
	for i, m := range a.Overrides {
		if m != "strict" && m != "dynamic" && m != "off" || len(i) == 0 || len(i) > 15 {
			probs = append(probs, "antispoof: override "+i+": "+m)
		}
	}
	if len(probs) > 0 {
		sort.Strings(probs)
		return nil, apierr.Invalid("documents", "%s: %s", Document, strings.Join(probs, "; ")).With("problems", probs)
	}
	if len(allow) > 50 {
		return nil, apierr.Invalid("documents", "%s: more than 50 allow-list entries do not fit one etcd transaction", Document)
	}

	s.mu.Lock()
	if s.w == nil {
		s.mu.Unlock()
		return nil, apierr.Unavailable("firewall: not serving yet")
	}
	// etcd refuses a put inside a range deleted in the same transaction:
	// delete the entries the document drops one by one.
	t := s.w.Txn().Put(s.spoof.key(), a)
	ops := 1 + len(allow)
	for p := range s.allow {
		if _, keep := allow[p]; !keep {
			t.Delete(s.allowKey(p))
			ops++
		}
	}
	if ops > 120 {
		s.mu.Unlock()
		return nil, apierr.Invalid("documents", "%s: replacing %d allow-list entries with %d does not fit one etcd transaction", Document, len(s.allow), len(allow))
	}
	for p, e := range allow {
		t.Put(s.allowKey(p), e)
	}
	if _, err := t.Commit(ctx); err != nil {
		s.mu.Unlock()
		return nil, storeErr(err)
	}
	s.allow = allow
	err := s.k.Rebuild(s.desired())
	s.mu.Unlock()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "%s stored but the kernel refused the table", Document)
	}
	s.spoof.mu.Lock()
	s.spoof.settings = a
	_, err = s.spoof.rebuildLocked()
	s.spoof.mu.Unlock()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "%s stored but the anti-spoofing rules were not applied", Document)
	}
	// No message: a message in an import answer is a problem the restore reports.
	return &api.ConfigImported{Documents: []string{Document}}, nil
}
