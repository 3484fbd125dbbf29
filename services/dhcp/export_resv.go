package dhcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// ReservationsDocument is the path of the reservations' configuration
// document: every /router/dhcp/reservations/ key, clients by MAC and
// fibre services by id, sorted.
const ReservationsDocument = "etc/dhcp-reservations.json"

type reservationsDoc struct {
	Clients  []config.Client  `json:"clients"`
	Services []config.Service `json:"services"`
}

// resvBatch bounds the operations of one etcd transaction of an import
// (etcd's default limit is 128).
const resvBatch = 100

// readReservations reads every reservation key, paged; records that do
// not parse are a *store.BrokenError naming them.
func (s *Service) readReservations(ctx context.Context) (reservationsDoc, map[string]bool, error) {
	doc := reservationsDoc{Clients: []config.Client{}, Services: []config.Service{}}
	keys := map[string]bool{}
	prefix := s.st.Key(ResvPrefix)
	end := clientv3.GetPrefixRangeEnd(prefix)
	var broken []string
	var rev int64
	for key := prefix; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(loadPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.d.KV.Get(ctx, key, opts...)
		if err != nil {
			return doc, nil, fmt.Errorf("dhcp: reading the reservations: %w", err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			keys[string(kv.Key)] = true
			k := strings.TrimPrefix(string(kv.Key), prefix)
			var err error
			switch {
			case strings.HasPrefix(k, "clients/"):
				var c config.Client
				if err = json.Unmarshal(kv.Value, &c); err == nil {
					doc.Clients = append(doc.Clients, c)
				}
			case strings.HasPrefix(k, "services/"):
				var v config.Service
				if err = json.Unmarshal(kv.Value, &v); err == nil {
					doc.Services = append(doc.Services, v)
				}
			}
			if err != nil {
				broken = append(broken, string(kv.Key))
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if len(broken) > 0 {
		return doc, nil, &store.BrokenError{Keys: broken}
	}
	return doc, keys, nil
}

func (s *Service) exportReservations(ctx context.Context) (string, error) {
	doc, _, err := s.readReservations(ctx)
	if err != nil {
		return "", err
	}
	out, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		return "", err
	}
	return string(out) + "\n", nil
}

// importReservations makes the stored reservations exactly those of the
// document: validated first (a bad one refuses the whole import, nothing
// changes), then written in transactions of resvBatch operations, removals
// first, and applied to the engine as a whole. A large document is
// therefore not one transaction: a failure half way leaves part written,
// and is reported as such.
func (s *Service) importReservations(ctx context.Context, text string) (string, error) {
	var doc reservationsDoc
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return "", apierr.Invalid("documents", "%s does not parse: %v", ReservationsDocument, err).With("broken_data_files", []string{ReservationsDocument})
	}
	want := map[string]any{}
	for i, c := range doc.Clients {
		mac, err := config.NormalizeMAC(c.MAC)
		if err != nil || !c.IP.Is4() {
			return "", apierr.Invalid("documents", "%s: client %d (%s): a MAC and an IPv4 address are required", ReservationsDocument, i, c.MAC)
		}
		doc.Clients[i].MAC = mac
		want[s.st.Key(resvClients+mac)] = doc.Clients[i]
	}
	for i, v := range doc.Services {
		if v.ID == "" || !v.IPv4.Is4() {
			return "", apierr.Invalid("documents", "%s: service %d (%s): an id and an IPv4 address are required", ReservationsDocument, i, v.ID)
		}
		want[s.st.Key(resvServices+v.ID)] = v
	}
	_, have, err := s.readReservations(ctx)
	if err != nil {
		if _, broken := err.(*store.BrokenError); !broken {
			return "", err
		}
		// Damaged records are replaced: list the keys alone.
		have = map[string]bool{}
		resp, gerr := s.d.KV.Get(ctx, s.st.Key(ResvPrefix), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if gerr != nil {
			return "", gerr
		}
		for _, kv := range resp.Kvs {
			have[string(kv.Key)] = true
		}
	}
	var ops []func(*store.Txn)
	for k := range have {
		if _, ok := want[k]; !ok {
			ops = append(ops, func(t *store.Txn) { t.Delete(k) })
		}
	}
	for k, v := range want {
		ops = append(ops, func(t *store.Txn) { t.Put(k, v) })
	}
	for i := 0; i < len(ops); i += resvBatch {
		t := s.wst.Txn()
		for _, op := range ops[i:min(i+resvBatch, len(ops))] {
			op(t)
		}
		if _, err := t.Commit(ctx); err != nil {
			return "", apierr.Internal(err.Error(), "%s: %d of %d reservation changes stored before the store failed", ReservationsDocument, i, len(ops))
		}
	}
	if eng, err := s.engine(); err == nil {
		if err := eng.SetReservations(doc.Clients, doc.Services); err != nil {
			return "stored, but the engine refused them as a whole: " + err.Error(), nil
		}
	}
	return "", nil
}
