package client

import (
	"context"
	"encoding/json"
	"errors"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
)

func jsonOf(c *api.Client) (string, error) {
	raw, err := json.Marshal(c)
	return string(raw), err
}

func jsonDecode(raw []byte, c *api.Client) error { return json.Unmarshal(raw, c) }

// reservation is the DHCP reservation a client needs (nil for none).
func reservation(c *api.Client) *api.ClientReservation {
	if c == nil {
		return nil
	}
	return &api.ClientReservation{MAC: c.MAC, IP: c.IP, IPv6: str(c.IPv6), Hostname: c.Hostname}
}

// block is the suspension block a client needs (nil for none).
func block(c *api.Client) *api.Block {
	if c == nil || !c.Suspended {
		return nil
	}
	return &api.Block{ID: c.MAC, MAC: c.MAC, IP: c.IP, IPv6: str(c.IPv6), Iface: c.Iface}
}

// shape is the shaping a client needs (nil for none), at its plan's rates.
func (b *Book) shape(ctx context.Context, c *api.Client) (*api.Shape, error) {
	if c == nil || c.Plan == nil {
		return nil, nil
	}
	p, err := b.d.Plans.Get(ctx, *c.Plan)
	if err != nil {
		return nil, err
	}
	return shapeAt(c, p.DownMbps, p.UpMbps), nil
}

func shapeAt(c *api.Client, down, up int64) *api.Shape {
	return &api.Shape{ID: c.MAC, IP: c.IP, Prefix6: str(c.IPv6), Iface: c.Iface, Plan: *c.Plan, DownMbps: down, UpMbps: up}
}

func same[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// step is one effect changed, and how to change it back.
type step struct {
	what       string // dhcp, shaper, firewall
	do, undo   func(ctx context.Context) error
	skipUndone bool
}

// apply brings the effects of a client from what old needs to what nc
// needs (nil: no client), in the order reservation, shaping, block. When a
// step fails the steps done are undone in reverse order and the error,
// naming the step, is returned. force applies every effect nc needs even
// when old needs the same (the reconcile at start).
func (b *Book) apply(ctx context.Context, old, nc *api.Client, force bool) error {
	var steps []step
	mac := macOf(old, nc)
	ro, rn := reservation(old), reservation(nc)
	if force || !same(ro, rn) {
		s := step{what: "dhcp", do: b.putResv(rn, mac), undo: b.putResv(ro, mac)}
		if rn == nil && ro != nil {
			// A removal undone puts back what dhcp held, a pinned
			// prefix (POST /pd/assign, kept by dhcp alone) included.
			back := *ro
			s.do = func(ctx context.Context) error {
				was, err := b.d.Fx.Unreserve(ctx, mac)
				if was != nil {
					back.Prefix6 = was.Prefix6
				}
				return err
			}
			s.undo = func(ctx context.Context) error { return b.d.Fx.Reserve(ctx, &back) }
		}
		steps = append(steps, s)
	}
	so, err := b.shape(ctx, old)
	if err != nil {
		return err
	}
	sn, err := b.shape(ctx, nc)
	if err != nil {
		return err
	}
	if force || !same(so, sn) {
		steps = append(steps, step{what: "shaper", do: b.putShape(sn, mac), undo: b.putShape(so, mac)})
	}
	bo, bn := block(old), block(nc)
	if force || !same(bo, bn) {
		steps = append(steps, step{what: "firewall", do: b.putBlock(bn, mac), undo: b.putBlock(bo, mac)})
	}
	for i, s := range steps {
		if err := s.do(ctx); err != nil {
			for j := i - 1; j >= 0; j-- {
				if uerr := steps[j].undo(context.WithoutCancel(ctx)); uerr != nil {
					b.d.Log.Error("client effect not undone", "what", steps[j].what, "err", uerr)
				}
			}
			return refused(s.what, err)
		}
	}
	return nil
}

func macOf(cs ...*api.Client) string {
	for _, c := range cs {
		if c != nil {
			return c.MAC
		}
	}
	return ""
}

func (b *Book) putResv(r *api.ClientReservation, mac string) func(context.Context) error {
	return func(ctx context.Context) error {
		if r == nil {
			_, err := b.d.Fx.Unreserve(ctx, mac)
			return err
		}
		return b.d.Fx.Reserve(ctx, r)
	}
}

func (b *Book) putShape(s *api.Shape, mac string) func(context.Context) error {
	return func(ctx context.Context) error {
		if s == nil {
			return b.d.Fx.Unshape(ctx, mac)
		}
		return b.d.Fx.Shape(ctx, s)
	}
}

func (b *Book) putBlock(bl *api.Block, mac string) func(context.Context) error {
	return func(ctx context.Context) error {
		if bl == nil {
			return b.d.Fx.Unblock(ctx, mac)
		}
		return b.d.Fx.Block(ctx, bl)
	}
}

// refused is the answer to a change whose effect `what` failed (and was
// rolled back whole): 409 when the owner says an address is taken, 503
// when it does not answer, otherwise 500 with its words in `detail`.
func refused(what string, err error) error {
	owner := map[string]string{"dhcp": "DHCP", "shaper": "the shaper", "firewall": "the firewall"}[what]
	var ae *apierr.Error
	if errors.As(err, &ae) {
		switch ae.Kind {
		case apierr.KindConflict:
			return apierr.Conflict("%s refused it: %s; rolled back", owner, ae.Message)
		case apierr.KindUnavailable:
			return apierr.New(apierr.KindUnavailable, "%s does not answer (%s); rolled back", owner, ae.Message)
		}
		return apierr.Internal(ae.Message, "%s does not take the client; rolled back", owner)
	}
	return apierr.Internal(err.Error(), "%s does not take the client; rolled back", owner)
}
