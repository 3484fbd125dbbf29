package dhcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/docobj"
	"routerd.dev/shared/store"
)

// ReservationsDocument is the path of the reservations' configuration
// document: every /router/dhcp/reservations/ key, clients by MAC and
// fibre services by id, sorted. It grows with the subscribers (100,000 of
// them are about 15 MB), so it is rendered and read a reservation at a
// time, and travels as an object of the document store past
// docobj.InlineMax (api.DHCPConfig streams it).
const ReservationsDocument = "etc/dhcp-reservations.json"

// renderReservations writes etc/dhcp-reservations.json to w from the
// stored keys, paged at one revision (clients/ sorts before services/,
// so one pass gives both arrays in order). Records that do not parse are
// a *store.BrokenError naming them all, at the end.
func (s *Service) renderReservations(ctx context.Context, w io.Writer) error {
	aw := docobj.NewArrayWriter(w)
	aw.Field("clients")
	inServices := false
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
			return fmt.Errorf("dhcp: reading the reservations: %w", err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			k := strings.TrimPrefix(string(kv.Key), prefix)
			var v any
			switch {
			case strings.HasPrefix(k, "clients/"):
				v = &config.Client{}
			case strings.HasPrefix(k, "services/"):
				if !inServices {
					aw.Field("services")
					inServices = true
				}
				v = &config.Service{}
			default:
				continue
			}
			if err := json.Unmarshal(kv.Value, v); err != nil {
				broken = append(broken, string(kv.Key))
				continue
			}
			if err := aw.Element(v); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if len(broken) > 0 {
		return &store.BrokenError{Keys: broken}
	}
	if !inServices {
		aw.Field("services")
	}
	return aw.Close()
}

// eachReservation decodes etc/dhcp-reservations.json from r one
// reservation at a time, normalised and checked (a MAC and an IPv4
// address per client, an id and an IPv4 address per service), and gives
// each to fn with its key. A document that does not parse, or a
// reservation that breaks a rule, is a 400.
func (s *Service) eachReservation(r io.Reader, fn func(key string, v any) error) error {
	ci, si := 0, 0
	err := docobj.Elements(r, map[string]func([]byte) error{
		"clients": func(raw []byte) error {
			var c config.Client
			if err := decodeClientReservation(raw, &c); err != nil {
				return err
			}
			mac, err := config.NormalizeMAC(c.MAC)
			if err != nil || !c.IP.Is4() {
				return apierr.Invalid("documents", "%s: client %d (%s): a MAC and an IPv4 address are required", ReservationsDocument, ci, c.MAC)
			}
			ci++
			c.MAC = mac
			return fn(s.st.Key(resvClients+mac), c)
		},
		"services": func(raw []byte) error {
			var v config.Service
			if err := docobj.Strict(raw, &v); err != nil {
				return err
			}
			if v.ID == "" || !v.IPv4.Is4() {
				return apierr.Invalid("documents", "%s: service %d (%s): an id and an IPv4 address are required", ReservationsDocument, si, v.ID)
			}
			si++
			return fn(s.st.Key(resvServices+v.ID), v)
		},
	})
	var ae *apierr.Error
	if err != nil && !errors.As(err, &ae) {
		return apierr.Invalid("documents", "%s does not parse: %v", ReservationsDocument, err).With("broken_data_files", []string{ReservationsDocument})
	}
	return err
}

// decodeClientReservation decodes one client reservation of the
// document as encoding/json would (unknown fields refused), without
// reflection when every value is a plain string or null, as the document
// is written (100,000 of them, twice an import).
func decodeClientReservation(raw []byte, c *config.Client) error {
	if docobj.Flat(raw, func(name, text []byte, kind byte) bool { return setReservationField(c, name, text, kind) }) {
		return nil
	}
	*c = config.Client{}
	return docobj.Strict(raw, c)
}

// decodeStoredReservation decodes a stored client reservation as
// json.Unmarshal would (a field of a newer version ignored), without
// reflection when it is plain, as this version stores it: the
// reservations' watch decodes one per change (100,000 in a restore onto
// an emptied router).
func decodeStoredReservation(raw []byte, c *config.Client) error {
	if docobj.Flat(raw, func(name, text []byte, kind byte) bool { return setReservationField(c, name, text, kind) }) {
		return nil
	}
	*c = config.Client{}
	return json.Unmarshal(raw, c)
}

// setReservationField sets the field of c named name (its json name) as
// encoding/json would from a string or null (kind as docobj.Flat gives
// it): the addresses and the prefix by their UnmarshalText (an empty
// string is the zero value), null leaving the field as it is. It reports
// false for a name or a value the field does not take, for docobj.Strict
// to decode or refuse.
func setReservationField(c *config.Client, name, text []byte, kind byte) bool {
	if kind == 'n' {
		switch string(name) {
		case "mac", "ip", "ipv6", "hostname", "prefix6":
			return true
		}
		return false
	}
	if kind != '"' {
		return false
	}
	var err error
	switch string(name) {
	case "mac":
		c.MAC = string(text)
	case "hostname":
		c.Hostname = string(text)
	case "ip":
		err = c.IP.UnmarshalText(text)
	case "ipv6":
		err = c.IPv6.UnmarshalText(text)
	case "prefix6":
		err = c.Prefix6.UnmarshalText(text)
	default:
		return false
	}
	return err == nil
}

// importReservations makes the stored reservations exactly those of the
// document, read as a stream (open gives it afresh) and never held whole,
// writing only what differs (store.Replace). The first pass checks every
// reservation (a bad one refuses the whole import, nothing changes) and
// notes the keys it wants while the stored ones are read; when they are
// exactly the stored ones, that is all. Otherwise a second pass writes
// each reservation changed or new, those the document does not hold are
// deleted, and the engine is waited for until its watch has applied
// every write. A large document is therefore not one transaction: a
// failure half way leaves part written, and is reported as such.
func (s *Service) importReservations(ctx context.Context, open func() (io.ReadCloser, error)) (string, error) {
	t0 := time.Now()
	rp := s.wst.Replace(ctx, s.st.Key(ResvPrefix))
	n, done := 0, 0
	res, err := rp.Sync(open, func(doc io.Reader, pass int, put func(k, v string) error) error {
		return s.eachReservation(doc, func(key string, v any) error {
			if put == nil { // nothing stored to compare with: a check only
				n++
				return nil
			}
			raw, err := json.Marshal(v)
			if err != nil {
				return err
			}
			if err := put(key, string(raw)); err != nil {
				return err
			}
			if pass == 1 {
				n++
			} else {
				done++
			}
			return nil
		})
	}, func(err error) error {
		return apierr.Internal(err.Error(), "%s: %d of its %d reservations given to the store, then it failed", ReservationsDocument, done, n)
	})
	s.d.Log.Info("reservations imported", "reservations", n, "unchanged", res.Unchanged, "written", res.Written,
		"deleted", res.Deleted, "checked_in", res.Checked.Round(time.Millisecond), "took", time.Since(t0).Round(time.Millisecond), "err", err)
	if err != nil || res.Revision == 0 {
		return "", err // refused, failed, or nothing written: nothing for the engine to take
	}
	if eng, err := s.engine(); err == nil {
		return s.settleReservations(ctx, eng, res.Revision)
	}
	return "", nil
}

// settleReservations waits until the engine's watch has applied every
// write of an import (up to revision last) and checks that the engine
// holds as many reservations as are stored: the watch applied each as an
// element change, so nothing is held twice. When it holds fewer (a
// reservation refused while one it conflicted with was not deleted yet),
// the engine loads them all again as at start, which holds every
// reservation once more (the whole set in memory for that moment).
func (s *Service) settleReservations(ctx context.Context, eng *Engine, last int64) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for s.resvApplied.Load() < last && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	count := func(kind string) (int, error) {
		g, err := s.d.KV.Get(ctx, s.st.Key(ResvPrefix+kind), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		return int(g.Count), nil
	}
	nc, err := count("clients/")
	if err != nil {
		return "", err
	}
	ns, err := count("services/")
	if err != nil {
		return "", err
	}
	if hc, hs := eng.ReservationCounts(); s.resvApplied.Load() >= last && hc == nc && hs == ns {
		return "", nil
	}
	clients, services, _, _, err := readAllReservations(ctx, s.d.KV, s.st.Key(ResvPrefix), s.d.Log)
	if err != nil {
		return "", err
	}
	if err := eng.SetReservations(clients, services); err != nil {
		return "stored, but the engine refused them as a whole: " + err.Error(), nil
	}
	return "", nil
}
