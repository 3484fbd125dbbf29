package dhcp

import (
	"context"
	"net/http"
	"net/netip"
	"strings"

	pb "routerd.dev/proto/bus"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/args"
	"routerd.dev/shared/bus"
)

// params are the operation's arguments: the body (or the action form's
// query), completed by the query string, where a REST GET carries its
// filters.
func params(req *pb.Request) args.Args {
	a := args.Parse(req.Args)
	for k, v := range req.Query {
		if !a.Has(k) && len(v) > 0 {
			a[k] = mustJSON(v[0])
		}
	}
	return a
}

func (s *Service) listLeases(ctx context.Context, req *pb.Request) (int, any, error) {
	eng, err := s.engine()
	if err != nil {
		return 0, nil, err
	}
	a := params(req)
	iface, kind, state, after, mac := a.String("iface"), a.String("kind"), a.String("state"), a.String("after"), a.String("mac")
	if mac != "" {
		if mac, err = config.NormalizeMAC(mac); err != nil {
			return 0, nil, apierr.Invalid("mac", "mac: %v", err)
		}
	}
	switch lease.Kind(kind) {
	case "", lease.V4, lease.NA, lease.PD:
	default:
		return 0, nil, apierr.Invalid("kind", "kind must be %s, %s or %s", lease.V4, lease.NA, lease.PD)
	}
	limit := defaultLeasePage
	if n, ok, err := a.Int("limit"); err != nil || ok && (n < 1 || n > maxLeasePage) {
		return 0, nil, apierr.Invalid("limit", "limit must be 1-%d", maxLeasePage)
	} else if ok {
		limit = int(n)
	}
	page := []lease.Lease{}
	total, next := 0, ""
	for _, l := range eng.Leases() { // sorted by key
		if iface != "" && l.Iface != iface || kind != "" && string(l.Kind) != kind ||
			state != "" && string(l.State) != state || mac != "" && l.MAC != mac {
			continue
		}
		total++
		if after != "" && l.Key() <= after {
			continue
		}
		if len(page) < limit {
			page = append(page, l)
		} else if next == "" {
			next = page[len(page)-1].Key()
		}
	}
	out := map[string]any{"count": len(page), "total": total, "leases": page}
	if next != "" {
		out["next"] = next
	}
	return http.StatusOK, out, nil
}

func (s *Service) getLease(ctx context.Context, req *pb.Request) (int, any, error) {
	eng, err := s.engine()
	if err != nil {
		return 0, nil, err
	}
	v := params(req).String("address")
	if v == "" {
		v = req.Params["address"]
	}
	var p netip.Prefix
	if strings.Contains(v, "/") {
		p, err = netip.ParsePrefix(v)
	} else {
		var ad netip.Addr
		if ad, err = netip.ParseAddr(v); err == nil {
			p = netip.PrefixFrom(ad, ad.BitLen())
		}
	}
	if err != nil {
		return 0, nil, apierr.Invalid("address", "address must be an IPv4 or IPv6 address or a delegated prefix, got %q", v)
	}
	l, ok := eng.Lease(p)
	if !ok {
		return 0, nil, apierr.NotFound("no lease on %s", v)
	}
	return http.StatusOK, map[string]any{"lease": l}, nil
}

// syncPD is /pd/sync: the delegated-route reconciler; dry only reports.
func (s *Service) syncPD(ctx context.Context, req *pb.Request) (int, any, error) {
	eng, err := s.engine()
	if err != nil {
		return 0, nil, err
	}
	dry, _, err := params(req).Bool("dry")
	if err != nil {
		return 0, nil, err
	}
	out, err := eng.SyncRoutes(dry)
	if err != nil {
		return 0, nil, err
	}
	if out == nil {
		out = []string{}
	}
	return http.StatusOK, map[string]any{"ok": true, "code": http.StatusOK, "dry_run": dry, "output": out}, nil
}

// Status is the engine's state as router.dhcp.status.get answers it.
type Status struct {
	Config ConfigState `json:"config"`
	// InForce is the configuration the engine serves (defaults filled in)
	// without its per-subscriber lists (clients, services, pinned
	// prefixes), which can run to 100,000 entries and past the bus's
	// message size; Counts says how long they are.
	InForce config.Config  `json:"in_force"`
	Counts  map[string]int `json:"counts"`
	// Leases counts leases by kind and state, e.g. "v4/bound".
	Leases map[string]int `json:"leases"`
	Events EventStats     `json:"events"`
	// Listeners counts each DHCP socket's requests and those shed.
	Listeners []ListenerStats `json:"listeners"`
}

func (s *Service) status(ctx context.Context, req *pb.Request) (int, any, error) {
	eng, err := s.engine()
	if err != nil {
		return 0, nil, err
	}
	counts := map[string]int{}
	for _, l := range eng.Leases() {
		counts[string(l.Kind)+"/"+string(l.State)]++
	}
	c := eng.Config()
	sizes := map[string]int{"networks": len(c.Networks), "networks6": len(c.Networks6),
		"clients": len(c.Clients), "services": len(c.Services), "pinned": len(c.PD.Pinned)}
	c.Clients, c.Services, c.PD.Pinned = nil, nil, nil
	return http.StatusOK, Status{Config: s.State(), InForce: c, Counts: sizes, Leases: counts, Events: s.events.Stats(), Listeners: eng.Listeners()}, nil
}

// Endpoints are the service's operations by subject.
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		{Subject: pb.DHCPLeasesList, Handler: s.listLeases},
		{Subject: pb.DHCPLeasesGet, Handler: s.getLease},
		{Subject: pb.DHCPPDSync, Handler: s.syncPD},
		{Subject: pb.DHCPStatusGet, Handler: s.status},
	}
}
