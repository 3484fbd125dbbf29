package netcfg

import (
	"context"
	"fmt"
	"net/http"

	pb "routerd.dev/proto/bus"

	"golang.org/x/sys/unix"
	"routerd.dev/proto/event"
	"routerd.dev/services/netcfg/route"
	"routerd.dev/shared/args"
	"routerd.dev/shared/bus"
)

func (s *Service) listRoutes(ctx context.Context, req *pb.Request) (int, any, error) {
	managed, err := s.routes.Managed(ctx)
	if err != nil {
		return 0, nil, err
	}
	v4, err := s.routes.Live(unix.AF_INET)
	if err != nil {
		return 0, nil, err
	}
	v6, err := s.routes.Live(unix.AF_INET6)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"count": len(managed), "managed": managed, "live_ipv4": v4, "live_ipv6": v6}, nil
}

func (s *Service) addRoute(ctx context.Context, req *pb.Request) (int, any, error) {
	a := args.Parse(req.Args)
	r, err := s.routes.Add(ctx, route.Input{Prefix: a.String("prefix"), Via: a.String("via"), Dev: a.String("dev"), Comment: a.String("comment")})
	if err != nil {
		return 0, nil, err
	}
	s.pub.Publish(event.RouteCreated, req, r)
	return http.StatusCreated, map[string]any{"ok": true, "code": http.StatusCreated, "message": "Route added", "route": r}, nil
}

func (s *Service) deleteRoute(ctx context.Context, req *pb.Request) (int, any, error) {
	a := args.Parse(req.Args)
	r, removed, err := s.routes.Delete(ctx, a.String("prefix"), a.String("via"), a.String("dev"))
	if err != nil {
		return 0, nil, err
	}
	s.pub.Publish(event.RouteDeleted, req, r)
	return http.StatusOK, map[string]any{"ok": true, "code": http.StatusOK, "message": "Route removed", "route": r, "kernel_removed": removed}, nil
}

func (s *Service) countInterfaces(ctx context.Context, req *pb.Request) (int, any, error) {
	links, err := s.nl.LinkList()
	if err != nil {
		return 0, nil, fmt.Errorf("listing interfaces: %w", err)
	}
	return http.StatusOK, map[string]int{"interfaces": len(links)}, nil
}

// Endpoints are the service's operations by subject; Run serves them on the
// bus, and benchmarks call them directly to measure the bus hop.
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		{Subject: pb.RoutesList, Handler: s.listRoutes},
		{Subject: pb.RoutesCreate, Handler: s.addRoute},
		{Subject: pb.RoutesDelete, Handler: s.deleteRoute},
		{Subject: pb.InterfacesCount, Handler: s.countInterfaces},
	}
}
