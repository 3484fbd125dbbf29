package netcfg

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/services/netcfg/route"
	"routerd.dev/shared/bus"
)

// Endpoints are the service's operations; Run serves them on the bus, and
// benchmarks call them directly to measure the bus hop.
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.RoutesList, s.listRoutes),
		bus.Bind(api.RoutesCreate, s.addRoute),
		bus.Bind(api.RoutesDelete, s.deleteRoute),
		bus.Bind(api.InterfacesCount, s.countInterfaces),
		bus.Bind(api.NetcfgConfig.Export, s.exportConfig),
		bus.Bind(api.NetcfgConfig.Import, s.importConfig),
		bus.Bind(api.VLANsList, s.vlans.List),
		bus.Bind(api.VLANsCreate, rendered(s, s.vlans.Create)),
		bus.Bind(api.VLANsDelete, rendered(s, s.vlans.Delete)),
		bus.Bind(api.VLANsDisable, rendered(s, s.vlans.Disable)),
		bus.Bind(api.VLANsEnable, rendered(s, s.vlans.Enable)),
		bus.Bind(api.AddrAdd, rendered(s, s.vlans.AddAddr)),
		bus.Bind(api.AddrDelete, rendered(s, s.vlans.DeleteAddr)),
		bus.Bind(api.AddrOther, s.vlans.OtherMethod),
		bus.Bind(api.IfaceListOp, s.vlans.Interfaces),
		bus.Bind(api.NetworkGet, s.networkGet),
		bus.Bind(api.NetworkPlanOp, s.networkPlan),
		bus.Bind(api.NetworkApplyOp, s.networkApply),
		bus.Bind(api.NetworkConfirmOp, s.networkConfirm),
		bus.Bind(api.NetworkRollbackOp, s.networkRollback),
		bus.Bind(api.NetworkAdoptOp, s.networkAdopt),
		bus.Bind(api.NetVLANCheckOp, s.netVLANCheck),
		bus.Bind(api.NetVLANAddOp, rendered(s, s.netVLANAdd)),
		bus.Bind(api.NetVLANDisableOp, rendered(s, s.netVLANDisable)),
		bus.Bind(api.NetVLANEnableOp, rendered(s, s.netVLANEnable)),
		bus.Bind(api.NetVLANDeleteOp, rendered(s, s.netVLANDelete)),
		bus.Bind(api.NetIPCheckOp, s.netIPCheck),
		bus.Bind(api.NetIPAddOp, rendered(s, s.netIPAdd)),
		bus.Bind(api.NetIPDeleteOp, rendered(s, s.netIPDelete)),
	}
}

func (s *Service) listRoutes(ctx context.Context, _ *api.None) (*api.RouteList, error) {
	managed, err := s.routes.Managed(ctx)
	if err != nil {
		return nil, err
	}
	v4, err := s.routes.Live(unix.AF_INET)
	if err != nil {
		return nil, err
	}
	v6, err := s.routes.Live(unix.AF_INET6)
	if err != nil {
		return nil, err
	}
	out := &api.RouteList{Count: len(managed), Managed: make([]api.Route, len(managed)), LiveIPv4: v4, LiveIPv6: v6}
	for i, r := range managed {
		out.Managed[i] = api.Route(r)
	}
	return out, nil
}

func (s *Service) addRoute(ctx context.Context, in *api.RouteAdd) (*api.RouteAnswer, error) {
	r, err := s.routes.Add(ctx, route.Input{Prefix: in.Prefix, Via: in.Via, Dev: in.Dev, Comment: in.Comment})
	if err != nil {
		return nil, err
	}
	return &api.RouteAnswer{Result: api.Result{Message: "Route added"}, Route: api.Route(r)}, nil
}

func (s *Service) deleteRoute(ctx context.Context, in *api.RouteDel) (*api.RouteDeleteAnswer, error) {
	r, removed, err := s.routes.Delete(ctx, in.Prefix, in.Via, in.Dev)
	if err != nil {
		return nil, err
	}
	return &api.RouteDeleteAnswer{Result: api.Result{Message: "Route removed"}, Route: api.Route(r), KernelRemoved: removed}, nil
}

func (s *Service) countInterfaces(ctx context.Context, _ *api.None) (*api.InterfaceCount, error) {
	n, err := s.links.count(s.deps.Now(), func() (int, error) {
		links, err := s.nl.LinkList()
		return len(links), err
	})
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	return &api.InterfaceCount{Interfaces: n}, nil
}

// linkCountTTL is how long GET /status's interface count is reused. A
// monitor polling /status many times a second would otherwise have the
// kernel dump every link with its statistics each time (a tenth of the
// CPU of a GET /status with a handful of links; milliseconds with
// thousands of VLANs); a count up to a second old is what any status
// page shows anyway.
const linkCountTTL = time.Second

// linkCount is the interface count, listed at most once per linkCountTTL:
// callers that arrive while a listing runs wait for it and share it.
type linkCount struct {
	mu sync.Mutex
	n  int
	at time.Time
}

func (c *linkCount) count(now time.Time, list func() (int, error)) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if age := now.Sub(c.at); !c.at.IsZero() && age >= 0 && age < linkCountTTL {
		return c.n, nil
	}
	n, err := list()
	if err != nil {
		return 0, err
	}
	c.n, c.at = n, now
	return n, nil
}
