package client

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
)

// RouterNet is an IPv4 network configured on a router interface, with the
// IPv6 network on the same interface when there is one.
type RouterNet struct {
	Iface    string
	Prefix   netip.Prefix // masked
	Gateway  netip.Addr   // the interface's address in it
	Prefix6  netip.Prefix // invalid when none
	Gateway6 netip.Addr
}

// Networks gives the router's networks.
type Networks interface {
	// Networks lists them; fresh asks past any cache.
	Networks(ctx context.Context, fresh bool) ([]RouterNet, error)
}

// Effects are the kernel effects of clients, each owned by another
// service: DHCP reservations (dhcp), shaping (shaper), suspension blocks
// (firewall). Removing what is absent is not an error.
type Effects interface {
	Reserve(ctx context.Context, r *api.ClientReservation) error
	// Unreserve answers the reservation it removed (nil when there was
	// none): it may hold a prefix pinned by POST /pd/assign, which only
	// dhcp keeps.
	Unreserve(ctx context.Context, mac string) (*api.ClientReservation, error)
	Shape(ctx context.Context, s *api.Shape) error
	Unshape(ctx context.Context, id string) error
	Block(ctx context.Context, b *api.Block) error
	Unblock(ctx context.Context, id string) error
	// ReshapePlan gives every shaped subscriber of a plan new rates.
	ReshapePlan(ctx context.Context, r *api.PlanRates) (int, error)
	// Reservations, Shapes and Blocks page what each owner holds (the
	// reconcile at start).
	Reservations(ctx context.Context, after string) (*api.ReservationList, error)
	Shapes(ctx context.Context, after string) (*api.ShapePage, error)
	Blocks(ctx context.Context, after string) (*api.BlockPage, error)
}

// Leases gives what dhcp hands out beside the reservations: its leases
// (GET /clients/active's dynamic leases, the delegated prefixes) and the
// prefixes pinned to single clients (GET /clients6's prefix6_pinned).
type Leases interface {
	Leases(ctx context.Context, f *api.LeaseFilter) (*api.LeaseList, error)
	// Pinned is GET /pd's pinned list: the prefixes of the reserved band
	// POST /pd/assign gave to single MACs.
	Pinned(ctx context.Context) ([]api.PinnedPrefix, error)
}

// OnBus is Networks, Effects and Leases asked of their owners on the bus.
type OnBus struct {
	NC *nats.Conn
	// TTL bounds how long the interface list is reused (default 5 s); a
	// client whose address is in none of the cached networks asks again.
	TTL time.Duration

	mu   sync.Mutex
	nets []RouterNet
	at   time.Time
}

// Networks reads dhcp's interfaces.list (the interfaces with an address in
// the router's namespace).
func (o *OnBus) Networks(ctx context.Context, fresh bool) ([]RouterNet, error) {
	ttl := o.TTL
	if ttl == 0 {
		ttl = 5 * time.Second
	}
	o.mu.Lock()
	if !fresh && o.nets != nil && time.Since(o.at) < ttl {
		n := o.nets
		o.mu.Unlock()
		return n, nil
	}
	o.mu.Unlock()
	l, err := bus.Invoke(ctx, o.NC, api.InterfacesList, &api.None{})
	if err != nil {
		return nil, err
	}
	var out []RouterNet
	for _, i := range l.Interfaces {
		gw, err := netip.ParseAddr(i.Gateway)
		if err != nil || !gw.Is4() || gw.IsLoopback() || i.CIDR <= 0 {
			continue
		}
		n := RouterNet{Iface: i.Iface, Gateway: gw, Prefix: netip.PrefixFrom(gw, i.CIDR).Masked()}
		if p, err := netip.ParsePrefix(i.Network6); err == nil {
			n.Prefix6 = p.Masked()
			n.Gateway6, _ = netip.ParseAddr(i.Gateway6)
		}
		out = append(out, n)
	}
	o.mu.Lock()
	o.nets, o.at = out, time.Now()
	o.mu.Unlock()
	return out, nil
}

func absentOK(err error) error {
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Kind == apierr.KindNotFound {
		return nil
	}
	return err
}

func (o *OnBus) Reserve(ctx context.Context, r *api.ClientReservation) error {
	_, err := bus.Invoke(ctx, o.NC, api.ReservationPutClient, r)
	return err
}

func (o *OnBus) Unreserve(ctx context.Context, mac string) (*api.ClientReservation, error) {
	a, err := bus.Invoke(ctx, o.NC, api.ReservationDelete, &api.ReservationRef{MAC: mac})
	if err != nil {
		return nil, absentOK(err)
	}
	return a.Client, nil
}

func (o *OnBus) Shape(ctx context.Context, s *api.Shape) error {
	_, err := bus.Invoke(ctx, o.NC, api.ShaperSet, s)
	return err
}

func (o *OnBus) Unshape(ctx context.Context, id string) error {
	_, err := bus.Invoke(ctx, o.NC, api.ShaperRemove, &api.ShapeRef{ID: id})
	return absentOK(err)
}

func (o *OnBus) Block(ctx context.Context, b *api.Block) error {
	_, err := bus.Invoke(ctx, o.NC, api.FirewallBlock, b)
	return err
}

func (o *OnBus) Unblock(ctx context.Context, id string) error {
	_, err := bus.Invoke(ctx, o.NC, api.FirewallUnblock, &api.BlockRef{ID: id})
	return absentOK(err)
}

func (o *OnBus) ReshapePlan(ctx context.Context, r *api.PlanRates) (int, error) {
	a, err := bus.Invoke(ctx, o.NC, api.ShaperPlan, r)
	if err != nil {
		return 0, err
	}
	return a.Reshaped, nil
}

func (o *OnBus) Reservations(ctx context.Context, after string) (*api.ReservationList, error) {
	return bus.Invoke(ctx, o.NC, api.ReservationsList, &api.ReservationFilter{Kind: "clients", Limit: 1000, After: after})
}

func (o *OnBus) Shapes(ctx context.Context, after string) (*api.ShapePage, error) {
	return bus.Invoke(ctx, o.NC, api.ShaperPage, &api.ShapePageRequest{After: after, Limit: 5000})
}

func (o *OnBus) Blocks(ctx context.Context, after string) (*api.BlockPage, error) {
	return bus.Invoke(ctx, o.NC, api.FirewallBlocks, &api.BlockPageRequest{After: after, Limit: 5000})
}

func (o *OnBus) Leases(ctx context.Context, f *api.LeaseFilter) (*api.LeaseList, error) {
	return bus.Invoke(ctx, o.NC, api.LeasesList, f)
}

func (o *OnBus) Pinned(ctx context.Context) ([]api.PinnedPrefix, error) {
	s, err := bus.Invoke(ctx, o.NC, api.PDGet, &api.None{})
	if err != nil {
		return nil, err
	}
	return s.Pinned, nil
}
