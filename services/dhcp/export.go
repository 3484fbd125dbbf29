package dhcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/docobj"
	"routerd.dev/shared/store"
)

// ConfigDocument is the path of the engine configuration's document: the
// stored /router/dhcp/config, indented; `null` when none is stored (serve
// nothing). Leases are state, not configuration: never exported.
const ConfigDocument = "etc/dhcp.json"

// exportConfig renders /router/dhcp/config as etc/dhcp.json
// (dhcp.config.export). A stored document that is not JSON is a 500 listing
// it in broken_data_files.
func (s *Service) exportConfig(ctx context.Context, _ *api.None) (*api.ConfigDocuments, error) {
	resp, err := s.d.KV.Get(ctx, s.st.Key(ConfigDoc))
	if err != nil {
		return nil, fmt.Errorf("dhcp: reading the configuration: %w", err)
	}
	text := "null\n"
	if len(resp.Kvs) > 0 {
		var buf bytes.Buffer
		if err := json.Indent(&buf, resp.Kvs[0].Value, "", "    "); err != nil {
			return nil, &store.BrokenError{Keys: []string{s.st.Key(ConfigDoc)}}
		}
		text = buf.String() + "\n"
	}
	out := &api.ConfigDocuments{Documents: map[string]string{ConfigDocument: text}}
	resv, obj, err := docobj.Render(ctx, s.d.NC, ReservationsDocument, func(w io.Writer) error { return s.renderReservations(ctx, w) })
	if err != nil {
		return nil, err
	}
	if obj != nil {
		out.Objects = map[string]api.ConfigObject{ReservationsDocument: *obj}
	} else {
		out.Documents[ReservationsDocument] = resv
	}
	return out, nil
}

// importConfig stores etc/dhcp.json as /router/dhcp/config (dhcp.config.import;
// `null` deletes it: serve nothing) and waits, up to 10 s, until the engine
// has applied it (the one stored and in force already is left as it is). A document that does not parse or validate is a 400 and
// nothing changes; without the document nothing changes.
//
// etc/dhcp-reservations.json follows, once the configuration is in force
// (reservations are checked against the served networks), as text or as
// an object of the document store (read as a stream).
func (s *Service) importConfig(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	a, err := s.importEngineConfig(ctx, in)
	if err != nil {
		return nil, err
	}
	if docobj.Has(in, ReservationsDocument) {
		msg, err := s.importReservations(ctx, func() (io.ReadCloser, error) {
			r, _, err := docobj.Reader(ctx, s.d.NC, in, ReservationsDocument)
			return r, err
		})
		if err != nil {
			return nil, err
		}
		a.Documents = append(a.Documents, ReservationsDocument)
		if msg != "" {
			a.Message = strings.TrimPrefix(a.Message+"; "+ReservationsDocument+": "+msg, "; ")
		}
	}
	return a, nil
}

func (s *Service) importEngineConfig(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	text, ok := in.Documents[ConfigDocument]
	if !ok {
		return &api.ConfigImported{Documents: []string{}}, nil
	}
	key := s.st.Key(ConfigDoc)
	txn := s.wst.Txn()
	if strings.TrimSpace(text) == "null" {
		txn.Delete(key)
	} else {
		if _, err := decodeConfig([]byte(text)); err != nil {
			return nil, apierr.Invalid("documents", "%s: %v", ConfigDocument, err).With("broken_data_files", []string{ConfigDocument})
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(text)); err != nil {
			return nil, apierr.Invalid("documents", "%s: %v", ConfigDocument, err)
		}
		// The configuration stored and in force already is not written
		// again: the engine would compile it anew with every reservation
		// (100,000 of them: seconds and a second copy of them in memory)
		// to serve what it serves. Its kernel state is re-applied: the
		// listeners reconciled, the delegated routes synchronised.
		resp, err := s.d.KV.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("dhcp: reading the configuration: %w", err)
		}
		if len(resp.Kvs) == 1 && bytes.Equal(resp.Kvs[0].Value, compact.Bytes()) {
			if st := s.State(); st.Source == "stored" && st.Revision == resp.Kvs[0].ModRevision {
				a := &api.ConfigImported{Documents: []string{ConfigDocument}}
				if eng, err := s.engine(); err == nil {
					select {
					case eng.kick <- struct{}{}:
					default:
					}
					if out, err := eng.SyncRoutes(false); err != nil {
						s.d.Log.Warn("import: delegated routes not synchronised", "err", err, "report", out)
					}
				}
				return a, nil
			}
		}
		txn.Put(key, json.RawMessage(compact.Bytes()))
	}
	rev, err := txn.Commit(ctx)
	if err != nil {
		if err == store.ErrLockLost {
			return nil, apierr.Unavailable("dhcp lost this host's lock to another replica; nothing changed")
		}
		return nil, fmt.Errorf("dhcp: storing the configuration: %w", err)
	}
	a := &api.ConfigImported{Documents: []string{ConfigDocument}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.State()
		if st.Revision >= rev || (st.Refused != nil && st.Refused.Revision >= rev) || (st.Source == "none" && strings.TrimSpace(text) == "null") {
			if st.Refused != nil && st.Refused.Revision >= rev {
				a.Message = "stored, but the engine refused it: " + st.Refused.Error
			}
			return a, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			a.Message = "stored; the engine had not applied it yet"
			return a, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}
