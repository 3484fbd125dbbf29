package routing

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/routing/conf"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Document is the routing settings' configuration document.
const Document = "etc/routing.json"

// Export renders the stored settings (BGP, peers, announcements,
// blackholes, OSPF) as etc/routing.json (routing.config.export). Peer
// passwords stay sealed with this router's key (<state_dir>/routing/
// seal.key): on another router they must be set again, or the key copied
// along with the backup.
func (s *Service) Export(ctx context.Context, _ *api.None) (*api.ConfigDocuments, error) {
	v, _, err := store.Get[conf.Settings](ctx, s.st, s.settingsKey())
	switch {
	case errors.Is(err, store.ErrNotFound):
		v = conf.Settings{}
	case err != nil:
		var be *store.BrokenError
		if errors.As(err, &be) {
			return nil, apierr.Broken([]string{Document})
		}
		return nil, err
	}
	v.Normal()
	out, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return nil, err
	}
	return &api.ConfigDocuments{Documents: map[string]string{Document: string(out) + "\n"}}, nil
}

// Import replaces the settings with etc/routing.json (routing.config.
// import): checked like a change (no problems, BIRD accepts the rendered
// configuration), stored, and loaded into BIRD. A change waiting for
// confirm is dropped: the restored settings are what the operator asked
// for. Without the document nothing changes; a document that does not
// parse or that BIRD refuses is a 400 and nothing changes.
func (s *Service) Import(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	text, ok := in.Documents[Document]
	if !ok {
		return &api.ConfigImported{Documents: []string{}}, nil
	}
	var next conf.Settings
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&next); err != nil {
		return nil, apierr.Invalid("documents", "%s does not parse: %v", Document, err).With("broken_data_files", []string{Document})
	}
	next.Normal()
	if probs := next.Problems(); len(probs) > 0 {
		return nil, apierr.Invalid("documents", "%s: %s", Document, strings.Join(probs, "; ")).With("problems", probs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fst == nil {
		return nil, apierr.Unavailable("the routing service is not serving")
	}
	_, installed := s.daemon.Installed()
	if installed == nil {
		text, err := s.render(next)
		if err != nil {
			return nil, apierr.Invalid("documents", "%s: %v", Document, err)
		}
		if err := s.daemon.Check(text); err != nil {
			return nil, apierr.Invalid("documents", "%s: BIRD refuses it: %v", Document, err)
		}
	}
	cur, rev, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.fst.Txn().IfRevision(s.settingsKey(), rev).Put(s.settingsKey(), next).Delete(s.pendingKey()).Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if installed == nil {
		if err := s.apply(ctx, next); err != nil {
			_, berr := s.fst.Txn().Put(s.settingsKey(), cur).Commit(context.WithoutCancel(ctx))
			rerr := s.apply(ctx, cur)
			s.deps.Log.Error("imported routing settings not loaded; previous settings restored", "err", err, "restore_store", berr, "restore_daemon", rerr)
			return nil, apierr.Internal(err.Error(), "BIRD did not load %s; the previous settings are back", Document)
		}
		s.refused.Store(nil)
	}
	return &api.ConfigImported{Documents: []string{Document}}, nil
}
