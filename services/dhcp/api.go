package dhcp

import (
	"context"
	"net/netip"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
)

// Endpoints are the service's operations.
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.LeasesList, s.listLeases),
		bus.Bind(api.LeasesGet, s.getLease),
		bus.Bind(api.PDSync, s.syncPD),
		bus.Bind(api.DHCPStatus, s.status),
		bus.Bind(api.DHCPConfig.Export, s.exportConfig),
		bus.Bind(api.DHCPConfig.Import, s.importConfig),
		bus.Bind(api.NetworksList, s.listNetworks),
		bus.Bind(api.InterfacesList, s.listInterfaces),
		bus.Bind(api.NetAdd, s.addNet),
		bus.Bind(api.NetDelete, s.deleteNet),
		bus.Bind(api.DHCPReload, s.reload),
		bus.Bind(api.DHCPUnknown, func(context.Context, *api.DHCPPath) (*api.None, error) {
			return nil, apierr.NotFound("no such DHCP operation")
		}),
		bus.Bind(api.Net6Add, s.addNet6),
		bus.Bind(api.Net6Delete, s.deleteNet6),
		bus.Bind(api.Net6Pool, s.setNet6Pool),
		bus.Bind(api.Net6Lease, s.setNet6Lease),
		bus.Bind(api.Net6DNS, s.setNet6DNS),
		bus.Bind(api.PDGet, s.getPD),
		bus.Bind(api.PDAdd, s.addPD),
		bus.Bind(api.PDResize, s.resizePD),
		bus.Bind(api.PDDelete, s.deletePD),
		bus.Bind(api.PDAssignOp, s.assignPD),
		bus.Bind(api.PDUnassignOp, s.unassignPD),
		bus.Bind(api.DNSGet, s.getDNS),
		bus.Bind(api.DNSSetOp, s.setDNS),
		bus.Bind(api.DNSIfaceDelete, s.deleteDNSIface),
		bus.Bind(api.DNSClearOp, s.clearDNS),
		bus.Bind(api.Option82Get, s.getOption82),
		bus.Bind(api.Option82SetOp, s.setOption82),
		bus.Bind(api.ReservationPutClient, s.putClient),
		bus.Bind(api.ReservationPutService, s.putService),
		bus.Bind(api.ReservationDelete, s.deleteReservation),
		bus.Bind(api.ReservationsList, s.listReservations),
		bus.Bind(api.ServingSetOp, s.setServing),
	}
}

func (s *Service) listLeases(ctx context.Context, in *api.LeaseFilter) (*api.LeaseList, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	mac := in.MAC
	if mac != "" {
		if mac, err = config.NormalizeMAC(mac); err != nil {
			return nil, apierr.Invalid("mac", "mac: %v", err)
		}
	}
	out := &api.LeaseList{Leases: []api.Lease{}}
	for _, l := range eng.Leases() { // sorted by key
		if in.Iface != "" && l.Iface != in.Iface || in.Kind != "" && string(l.Kind) != in.Kind ||
			in.State != "" && string(l.State) != in.State || mac != "" && l.MAC != mac {
			continue
		}
		out.Total++
		if in.After != "" && l.Key() <= in.After {
			continue
		}
		if len(out.Leases) < in.Limit {
			out.Leases = append(out.Leases, wire(l))
		} else if out.Next == "" {
			last := out.Leases[len(out.Leases)-1]
			out.Next = (&lease.Lease{Kind: lease.Kind(last.Kind), Addr: last.Addr, PrefixLen: last.PrefixLen}).Key()
		}
	}
	out.Count = len(out.Leases)
	return out, nil
}

// wire is a lease as the API shows it.
func wire(l lease.Lease) api.Lease {
	return api.Lease{Kind: string(l.Kind), Addr: l.Addr, PrefixLen: l.PrefixLen, Iface: l.Iface, MAC: l.MAC,
		ClientID: l.ClientID, DUID: l.DUID, IAID: l.IAID, Hostname: l.Hostname, State: string(l.State),
		Start: l.Start, End: l.End, CircuitID: l.CircuitID, RemoteID: l.RemoteID, Via: l.Via}
}

func (s *Service) getLease(ctx context.Context, in *api.LeaseRef) (*api.LeaseAnswer, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	var p netip.Prefix
	if strings.Contains(in.Address, "/") {
		p, err = netip.ParsePrefix(in.Address)
	} else {
		var ad netip.Addr
		if ad, err = netip.ParseAddr(in.Address); err == nil {
			p = netip.PrefixFrom(ad, ad.BitLen())
		}
	}
	if err != nil {
		return nil, apierr.Invalid("address", "address must be an IPv4 or IPv6 address or a delegated prefix, got %q", in.Address)
	}
	l, ok := eng.Lease(p)
	if !ok {
		return nil, apierr.NotFound("no lease on %s", in.Address)
	}
	return &api.LeaseAnswer{Lease: wire(l)}, nil
}

// syncPD is /pd/sync: the delegated-route reconciler; dry only reports.
func (s *Service) syncPD(ctx context.Context, in *api.PDSyncRequest) (*api.PDSyncAnswer, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	out, err := eng.SyncRoutes(in.Dry)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return &api.PDSyncAnswer{DryRun: in.Dry, Output: out}, nil
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

func (s *Service) status(ctx context.Context, _ *api.None) (*api.DHCPState, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, l := range eng.Leases() {
		counts[string(l.Kind)+"/"+string(l.State)]++
	}
	c := eng.Config()
	rc, rs := eng.ReservationCounts()
	sizes := map[string]int{"networks": len(c.Networks), "networks6": len(c.Networks6),
		"clients": len(c.Clients) + rc, "services": len(c.Services) + rs, "pinned": len(c.PD.Pinned)}
	c.Clients, c.Services, c.PD.Pinned = nil, nil, nil
	return &api.DHCPState{Config: s.State(), InForce: c, Counts: sizes, Leases: counts, Events: s.events.Stats(), Listeners: eng.Listeners()}, nil
}
