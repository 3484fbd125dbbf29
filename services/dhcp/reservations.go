package dhcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Per-subscriber data, one key each:
//
//	/router/dhcp/reservations/clients/<MAC>   a config.Client (ip, ipv6, prefix6, hostname)
//	/router/dhcp/reservations/services/<id>   a config.Service (olt, pon, ont_id, sn, ipv4)
//
// The served-network configuration (/router/dhcp/config) holds none. The
// keys are written through the reservations.* bus operations (the
// subscribers service calls them), which apply the change to the engine
// first (validated against the served networks and every other
// reservation, atomically) and store it second, undoing the engine change
// when the store fails. The engine also watches the prefix: every change,
// from any writer, is one element change (Engine.PutClient and friends),
// never a reconfiguration; a put that is already in force changes nothing.
const (
	ResvPrefix   = "reservations/"
	resvClients  = ResvPrefix + "clients/"
	resvServices = ResvPrefix + "services/"
	// loadPage is how many keys one range read of the start load fetches.
	loadPage = 10000
)

func clientOf(in *api.ClientReservation) (config.Client, error) {
	c := config.Client{Hostname: in.Hostname}
	var err error
	if c.MAC, err = config.NormalizeMAC(in.MAC); err != nil {
		return c, apierr.Invalid("mac", "%v", err)
	}
	if c.IP, err = netip.ParseAddr(in.IP); err != nil {
		return c, apierr.Invalid("ip", "invalid ip %q", in.IP)
	}
	if in.IPv6 != "" {
		if c.IPv6, err = netip.ParseAddr(in.IPv6); err != nil {
			return c, apierr.Invalid("ipv6", "invalid ipv6 %q", in.IPv6)
		}
	}
	if in.Prefix6 != "" {
		if c.Prefix6, err = netip.ParsePrefix(in.Prefix6); err != nil || !c.Prefix6.Addr().Is6() {
			return c, apierr.Invalid("prefix6", "invalid prefix6 %q", in.Prefix6)
		}
	}
	return c, nil
}

func wireClient(c config.Client) *api.ClientReservation {
	out := &api.ClientReservation{MAC: c.MAC, IP: c.IP.String(), Hostname: c.Hostname}
	if c.IPv6.IsValid() {
		out.IPv6 = c.IPv6.String()
	}
	if c.Prefix6.IsValid() {
		out.Prefix6 = c.Prefix6.String()
	}
	return out
}

func serviceOf(in *api.ServiceReservation) (config.Service, error) {
	s := config.Service{ID: in.ID, OLT: in.OLT, PON: in.PON, ONTID: in.ONTID, SN: in.SN, Hostname: in.Hostname}
	var err error
	if s.IPv4, err = netip.ParseAddr(in.IPv4); err != nil {
		return s, apierr.Invalid("ipv4", "invalid ipv4 %q", in.IPv4)
	}
	return s, nil
}

func wireService(s config.Service) *api.ServiceReservation {
	return &api.ServiceReservation{ID: s.ID, OLT: s.OLT, PON: s.PON, ONTID: s.ONTID, SN: s.SN, IPv4: s.IPv4.String(), Hostname: s.Hostname}
}

// refusal turns an engine refusal into the API's answer.
func refusal(field string, err error) error {
	if errors.Is(err, ErrReservationConflict) {
		return apierr.Conflict("%v", err)
	}
	return apierr.Invalid(field, "%v", err)
}

func (s *Service) putClient(ctx context.Context, in *api.ClientReservation) (*api.ReservationAnswer, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	c, err := clientOf(in)
	if err != nil {
		return nil, err
	}
	old, had := eng.client(c.MAC)
	created, err := eng.PutClient(c)
	if err != nil {
		return nil, refusal("ip", err)
	}
	if _, err := s.wst.Txn().Put(s.st.Key(resvClients+c.MAC), c).Commit(ctx); err != nil {
		if had {
			_, _ = eng.PutClient(old)
		} else {
			eng.DeleteClient(c.MAC)
		}
		return nil, apierr.Internal(err.Error(), "the reservation cannot be stored; rolled back")
	}
	out := &api.ReservationAnswer{Result: api.Result{Message: "Reservation added"}, Client: wireClient(c)}
	if !created {
		out.Code, out.Message = 200, "Reservation changed"
	}
	return out, nil
}

func (s *Service) putService(ctx context.Context, in *api.ServiceReservation) (*api.ReservationAnswer, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	sv, err := serviceOf(in)
	if err != nil {
		return nil, err
	}
	old, had := eng.service(sv.ID)
	created, err := eng.PutService(sv)
	if err != nil {
		return nil, refusal("ipv4", err)
	}
	if _, err := s.wst.Txn().Put(s.st.Key(resvServices+sv.ID), sv).Commit(ctx); err != nil {
		if had {
			_, _ = eng.PutService(old)
		} else {
			eng.DeleteService(sv.ID)
		}
		return nil, apierr.Internal(err.Error(), "the reservation cannot be stored; rolled back")
	}
	out := &api.ReservationAnswer{Result: api.Result{Message: "Reservation added"}, Service: wireService(sv)}
	if !created {
		out.Code, out.Message = 200, "Reservation changed"
	}
	return out, nil
}

func (s *Service) deleteReservation(ctx context.Context, in *api.ReservationRef) (*api.ReservationAnswer, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	out := &api.ReservationAnswer{Result: api.Result{Message: "Reservation removed"}}
	var key string
	if in.MAC != "" {
		m, err := config.NormalizeMAC(in.MAC)
		if err != nil {
			return nil, apierr.Invalid("mac", "%v", err)
		}
		c, ok := eng.client(m)
		if !ok {
			return nil, apierr.NotFound("no reservation for %s", m)
		}
		key, out.Client = resvClients+m, wireClient(c)
	} else {
		sv, ok := eng.service(in.ID)
		if !ok {
			return nil, apierr.NotFound("no reservation for service %s", in.ID)
		}
		key, out.Service = resvServices+in.ID, wireService(sv)
	}
	if _, err := s.wst.Txn().Delete(s.st.Key(key)).Commit(ctx); err != nil {
		return nil, apierr.Internal(err.Error(), "the reservation cannot be removed")
	}
	if in.MAC != "" {
		eng.DeleteClient(in.MAC)
	} else {
		eng.DeleteService(in.ID)
	}
	return out, nil
}

func (s *Service) listReservations(ctx context.Context, in *api.ReservationFilter) (*api.ReservationList, error) {
	prefix := s.st.Key(resvClients)
	if in.Kind == "services" {
		prefix = s.st.Key(resvServices)
	}
	from := prefix
	if in.After != "" {
		from = prefix + in.After + "\x00"
	}
	resp, err := s.d.KV.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)),
		clientv3.WithLimit(int64(in.Limit)+1), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, apierr.Unavailable("the store cannot be read: %v", err)
	}
	out := &api.ReservationList{}
	for i, kv := range resp.Kvs {
		if i == in.Limit {
			out.Next = strings.TrimPrefix(string(resp.Kvs[i-1].Key), prefix)
			break
		}
		if in.Kind == "services" {
			var v config.Service
			if json.Unmarshal(kv.Value, &v) == nil {
				out.Services = append(out.Services, *wireService(v))
			}
		} else {
			var v config.Client
			if json.Unmarshal(kv.Value, &v) == nil {
				out.Clients = append(out.Clients, *wireClient(v))
			}
		}
	}
	out.Count = len(out.Clients) + len(out.Services)
	if out.Clients == nil && in.Kind == "clients" {
		out.Clients = []api.ClientReservation{}
	}
	if out.Services == nil && in.Kind == "services" {
		out.Services = []api.ServiceReservation{}
	}
	return out, nil
}

// loadReservations reads every reservation key and gives them to the
// engine at once. It returns the revision they were read at (the watch
// starts after it). A set the engine refuses whole is applied one by
// one, each refused one logged and left out.
func (s *Service) loadReservations(ctx context.Context, eng *Engine) error {
	_, err := s.loadReservationsAt(ctx, eng)
	return err
}

func (s *Service) loadReservationsAt(ctx context.Context, eng *Engine) (int64, error) {
	rev, err := LoadReservations(ctx, s.d.KV, s.st.Key(ResvPrefix), eng, s.d.Log)
	if err == nil {
		s.resvApplied.Store(rev)
	}
	return rev, err
}

// LoadReservations reads every reservation key under prefix (the dhcp
// store's ResvPrefix) in one consistent snapshot and gives them to eng at
// once; it returns the revision they were read at. The service loads them
// this way at start, and the perfdhcp benchmark server too, so that the
// DHCP rates it measures are those of reservations stored one key each.
func LoadReservations(ctx context.Context, kv *clientv3.Client, prefix string, eng *Engine, log *slog.Logger) (int64, error) {
	start := time.Now()
	clients, services, rev, bad, err := readAllReservations(ctx, kv, prefix, log)
	if err != nil {
		return 0, err
	}
	if err := eng.SetReservations(clients, services); err != nil {
		log.Warn("reservations refused as a whole; applying them one by one", "err", err)
		_ = eng.SetReservations(nil, nil)
		for _, c := range clients {
			if _, err := eng.PutClient(c); err != nil {
				bad++
				log.Error("reservation refused; left out", "mac", c.MAC, "err", err)
			}
		}
		for _, v := range services {
			if _, err := eng.PutService(v); err != nil {
				bad++
				log.Error("reservation refused; left out", "service", v.ID, "err", err)
			}
		}
	}
	log.Info("reservations loaded", "clients", len(clients), "services", len(services), "refused", bad,
		"took", time.Since(start).Round(time.Millisecond))
	return rev, nil
}

// readAllReservations reads every reservation key under prefix in one
// consistent snapshot; records that do not parse are logged, counted in
// bad and left out.
func readAllReservations(ctx context.Context, kv *clientv3.Client, prefix string, log *slog.Logger) (clients []config.Client, services []config.Service, rev int64, bad int, err error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	for key := prefix; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(loadPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev)) // one consistent snapshot
		}
		resp, err := kv.Get(ctx, key, opts...)
		if err != nil {
			return nil, nil, 0, 0, fmt.Errorf("reading the reservations: %w", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			k := strings.TrimPrefix(string(kv.Key), prefix)
			switch {
			case strings.HasPrefix(k, "clients/"):
				var c config.Client
				if err := decodeStoredReservation(kv.Value, &c); err != nil {
					bad++
					log.Error("reservation unreadable; left out", "key", string(kv.Key), "err", err)
					continue
				}
				clients = append(clients, c)
			case strings.HasPrefix(k, "services/"):
				var v config.Service
				if err := json.Unmarshal(kv.Value, &v); err != nil {
					bad++
					log.Error("reservation unreadable; left out", "key", string(kv.Key), "err", err)
					continue
				}
				services = append(services, v)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return clients, services, rev, bad, nil
}

// watchReservations applies every change under the reservations prefix
// after rev as one element change, until ctx ends. After a broken watch it
// loads them all again.
func (s *Service) watchReservations(ctx context.Context, eng *Engine, rev int64) {
	prefix := s.st.Key(ResvPrefix)
	for ctx.Err() == nil {
		wch := s.d.KV.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				s.d.Log.Warn("reservations watch interrupted; loading them again", "err", err)
				break
			}
			for _, ev := range resp.Events {
				s.applyReservation(eng, strings.TrimPrefix(string(ev.Kv.Key), prefix), ev.Type == clientv3.EventTypeDelete, ev.Kv.Value)
				rev = ev.Kv.ModRevision
			}
			s.resvApplied.Store(rev)
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if r, err := s.loadReservationsAt(ctx, eng); err == nil {
			rev = r
		}
	}
}

func (s *Service) applyReservation(eng *Engine, k string, deleted bool, raw []byte) {
	switch {
	case strings.HasPrefix(k, "clients/"):
		mac := strings.TrimPrefix(k, "clients/")
		if deleted {
			eng.DeleteClient(mac)
			return
		}
		var c config.Client
		if err := decodeStoredReservation(raw, &c); err != nil {
			s.d.Log.Error("stored reservation unreadable; ignored", "key", k, "err", err)
			return
		}
		if cur, ok := eng.client(c.MAC); ok && cur == c {
			return
		}
		if _, err := eng.PutClient(c); err != nil {
			s.d.Log.Error("stored reservation refused; ignored", "key", k, "err", err)
		}
	case strings.HasPrefix(k, "services/"):
		id := strings.TrimPrefix(k, "services/")
		if deleted {
			eng.DeleteService(id)
			return
		}
		var v config.Service
		if err := json.Unmarshal(raw, &v); err != nil {
			s.d.Log.Error("stored reservation unreadable; ignored", "key", k, "err", err)
			return
		}
		if cur, ok := eng.service(v.ID); ok && cur == v {
			return
		}
		if _, err := eng.PutService(v); err != nil {
			s.d.Log.Error("stored reservation refused; ignored", "key", k, "err", err)
		}
	}
}

// migrate moves the reservations an older stored configuration carries
// (clients, services, pinned prefixes) to their own keys, then stores the
// configuration without them. A key already present wins. Idempotent: a
// crash in between leaves a configuration that migrates again.
func (s *Service) migrate(ctx context.Context) error {
	resp, err := s.d.KV.Get(ctx, s.st.Key(ConfigDoc))
	if err != nil || len(resp.Kvs) == 0 {
		return err
	}
	kv := resp.Kvs[0]
	c, err := decodeConfig(kv.Value)
	if err != nil || len(c.Clients) == 0 && len(c.Services) == 0 && len(c.PD.Pinned) == 0 {
		return nil // nothing to move (a refused document is left as it is)
	}
	clients := map[string]config.Client{}
	for _, cl := range c.Clients {
		m, _ := config.NormalizeMAC(cl.MAC)
		cl.MAC = m
		clients[m] = cl
	}
	for _, p := range c.PD.Pinned {
		m, _ := config.NormalizeMAC(p.MAC)
		cl, ok := clients[m]
		if !ok {
			s.d.Log.Warn("pinned prefix of a MAC without a reservation left in the configuration", "mac", m)
			continue
		}
		cl.Prefix6 = p.Prefix
		clients[m] = cl
	}
	var keys []string
	var vals []any
	for m, cl := range clients {
		keys, vals = append(keys, s.st.Key(resvClients+m)), append(vals, cl)
	}
	for _, sv := range c.Services {
		keys, vals = append(keys, s.st.Key(resvServices+sv.ID)), append(vals, sv)
	}
	for j := range keys {
		// One transaction per key keeps "a key already present wins"
		// exact; migration happens once.
		_, err := s.wst.Txn().IfAbsent(keys[j]).Put(keys[j], vals[j]).Commit(ctx)
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("migrating reservations: %w", err)
		}
	}
	kept := c.PD.Pinned[:0]
	for _, p := range c.PD.Pinned {
		m, _ := config.NormalizeMAC(p.MAC)
		if _, ok := clients[m]; !ok {
			kept = append(kept, p)
		}
	}
	c.Clients, c.Services, c.PD.Pinned = nil, nil, kept
	if _, err := s.wst.Txn().IfRevision(s.st.Key(ConfigDoc), kv.ModRevision).Put(s.st.Key(ConfigDoc), c).Commit(ctx); err != nil {
		return fmt.Errorf("storing the configuration without its reservations: %w", err)
	}
	s.d.Log.Info("reservations moved out of the configuration to one key each", "count", len(keys))
	return nil
}
