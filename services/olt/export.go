package olt

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Document is the OLT registry's configuration document.
const Document = "etc/olts.json"

// document is etc/olts.json: every registered OLT, sorted by name, with
// its credentials still sealed with this router's key
// (<state_dir>/olt-credentials.key). Restored on another router, the
// records come back but their credentials cannot be opened there: each
// OLT's user and pass must be sent again (POST /olts/{name}), or the key
// file copied along with the backup.
type document struct {
	OLTs []stored `json:"olts"`
}

var oltName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

// Export renders the registry as etc/olts.json (olt.config.export).
func (s *Service) Export(ctx context.Context, _ *api.None) (*api.ConfigDocuments, error) {
	recs, err := s.all(ctx)
	if err != nil {
		var be *store.BrokenError
		if errors.As(err, &be) {
			return nil, apierr.Broken([]string{Document})
		}
		return nil, err
	}
	out, err := json.MarshalIndent(document{OLTs: recs}, "", "    ")
	if err != nil {
		return nil, err
	}
	return &api.ConfigDocuments{Documents: map[string]string{Document: string(out) + "\n"}}, nil
}

// Import replaces the registry with etc/olts.json in one transaction
// (olt.config.import). Without the document nothing changes; one that does
// not parse, or an OLT record that POST /olts would refuse, is a 400 and
// nothing changes.
func (s *Service) Import(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	text, ok := in.Documents[Document]
	if !ok {
		return &api.ConfigImported{Documents: []string{}}, nil
	}
	var doc document
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, apierr.Invalid("documents", "%s does not parse: %v", Document, err).With("broken_data_files", []string{Document})
	}
	seen := map[string]bool{}
	for _, o := range doc.OLTs {
		switch {
		case !oltName.MatchString(o.Name):
			return nil, apierr.Invalid("documents", "%s: OLT name %q is invalid", Document, o.Name)
		case seen[o.Name]:
			return nil, apierr.Invalid("documents", "%s: OLT %s twice", Document, o.Name)
		case o.Host == "" || o.Port < 1 || o.Port > 65535:
			return nil, apierr.Invalid("documents", "%s: OLT %s: host and a port 1-65535 are needed", Document, o.Name)
		case o.Protocol != "telnet" && o.Protocol != "ssh":
			return nil, apierr.Invalid("documents", "%s: OLT %s: protocol must be telnet or ssh", Document, o.Name)
		case o.SVLAN < 0 || o.SVLAN > 4094 || o.IPTVVLAN < 0 || o.IPTVVLAN > 4094:
			return nil, apierr.Invalid("documents", "%s: OLT %s: VLANs must be 0-4094", Document, o.Name)
		}
		seen[o.Name] = true
	}
	prefix := s.st.Key("olts") + "/"
	resp, err := s.st.Client().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	txn := s.st.Txn()
	for _, kv := range resp.Kvs {
		if !seen[strings.TrimPrefix(string(kv.Key), prefix)] {
			txn.Delete(string(kv.Key))
		}
	}
	for _, o := range doc.OLTs {
		txn.Put(s.key(o.Name), o)
	}
	if _, err := txn.Commit(ctx); err != nil {
		return nil, err
	}
	// Connections to the OLTs are made again with the records brought in.
	for _, o := range doc.OLTs {
		s.drivers.Forget(o.Host)
	}
	s.log.Info("OLT registry imported", "olts", len(doc.OLTs), "by", api.OriginOf(ctx).String())
	return &api.ConfigImported{Documents: []string{Document}}, nil
}
