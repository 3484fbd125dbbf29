package dhcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
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
	resv, err := s.exportReservations(ctx)
	if err != nil {
		return nil, err
	}
	return &api.ConfigDocuments{Documents: map[string]string{ConfigDocument: text, ReservationsDocument: resv}}, nil
}

// importConfig stores etc/dhcp.json as /router/dhcp/config (dhcp.config.import;
// `null` deletes it: serve nothing) and waits, up to 10 s, until the engine
// has applied it. A document that does not parse or validate is a 400 and
// nothing changes; without the document nothing changes.
//
// etc/dhcp-reservations.json follows, once the configuration is in force
// (reservations are checked against the served networks).
func (s *Service) importConfig(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	a, err := s.importEngineConfig(ctx, in)
	if err != nil {
		return nil, err
	}
	if text, ok := in.Documents[ReservationsDocument]; ok {
		msg, err := s.importReservations(ctx, text)
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
