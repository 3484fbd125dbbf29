package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Document is the path of the plans' configuration document.
const Document = "etc/plans.json"

// document is etc/plans.json: every plan, sorted by name.
type document struct {
	Plans []Plan `json:"plans"`
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

// Export renders the plans as etc/plans.json (subscribers.config.export).
func (b *Book) Export(ctx context.Context, _ *api.None) (*api.ConfigDocuments, error) {
	items, err := store.List[Plan](ctx, b.st, b.st.Key("plans")+"/")
	if err != nil {
		return nil, err
	}
	doc := document{Plans: make([]Plan, 0, len(items))}
	for _, it := range items {
		doc.Plans = append(doc.Plans, it.Value)
	}
	sort.Slice(doc.Plans, func(i, j int) bool { return doc.Plans[i].Name < doc.Plans[j].Name })
	out, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		return nil, err
	}
	return &api.ConfigDocuments{Documents: map[string]string{Document: string(out) + "\n"}}, nil
}

// Names checks etc/plans.json as Import would and returns its plan names.
func Names(text string) (map[string]bool, error) {
	doc, err := parseDocument(text)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, p := range doc.Plans {
		names[p.Name] = true
	}
	return names, nil
}

func parseDocument(text string) (document, error) {
	var doc document
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return doc, apierr.Invalid("documents", "%s does not parse: %v", Document, err).With("broken_data_files", []string{Document})
	}
	seen := map[string]bool{}
	for _, p := range doc.Plans {
		switch {
		case !namePattern.MatchString(p.Name):
			return doc, apierr.Invalid("documents", "%s: plan name %q is invalid", Document, p.Name)
		case seen[p.Name]:
			return doc, apierr.Invalid("documents", "%s: plan %s twice", Document, p.Name)
		case p.DownMbps < 1 || p.DownMbps > 100000 || p.UpMbps < 1 || p.UpMbps > 100000:
			return doc, apierr.Invalid("documents", "%s: plan %s: rates must be 1-100000 Mbit/s", Document, p.Name)
		case len([]rune(p.Comment)) > 200:
			return doc, apierr.Invalid("documents", "%s: plan %s: comment longer than 200 characters", Document, p.Name)
		}
		seen[p.Name] = true
	}
	return doc, nil
}

// Import replaces every plan with those of etc/plans.json in one
// transaction (one etcd operation per plan: etcd's limit of operations per
// transaction bounds how many plans one import carries) (subscribers.config.import); without that document nothing
// changes. A document that does not parse, or a plan that breaks the
// rules of POST /plans, is a 400 and nothing changes.
func (b *Book) Import(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	text, ok := in.Documents[Document]
	if !ok {
		return &api.ConfigImported{Documents: []string{}}, nil
	}
	doc, err := parseDocument(text)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, p := range doc.Plans {
		seen[p.Name] = true
	}
	// Clients may name plans: a plan in use must survive the import.
	users, err := b.users(ctx)
	if err != nil {
		return nil, err
	}
	for name, macs := range users {
		if !seen[name] {
			return nil, apierr.Conflict("%s lacks plan %s, which %d clients use", Document, name, len(macs)).With("clients", macs)
		}
	}
	resp, err := b.st.Client().Get(ctx, b.st.Key("plans")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("plans: reading the stored plans: %w", err)
	}
	txn := b.st.Txn()
	for _, kv := range resp.Kvs {
		if !seen[strings.TrimPrefix(string(kv.Key), b.st.Key("plans")+"/")] {
			txn.Delete(string(kv.Key))
		}
	}
	for _, p := range doc.Plans {
		if p.Created == "" {
			p.Created = b.now().Format(TimeLayout)
		}
		txn.Put(b.key(p.Name), p)
	}
	if _, err := txn.Commit(ctx); err != nil {
		return nil, fmt.Errorf("plans: storing %s: %w", Document, err)
	}
	return &api.ConfigImported{Documents: []string{Document}}, nil
}
