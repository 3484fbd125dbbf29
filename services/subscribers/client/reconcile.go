package client

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"routerd.dev/proto/api"
)

// ReconcileResult says what a reconcile of the clients' effects did, per
// owner; Skipped names owners that could not be read (not running).
type ReconcileResult struct {
	Clients              int
	Reserved, Unreserved int
	Shaped, Unshaped     int
	Blocked, Unblocked   int
	Failed               int
	Skipped              map[string]string
}

// called is how many owner calls the reconcile has made, failed or not.
func (r *ReconcileResult) called() int {
	return r.Reserved + r.Unreserved + r.Shaped + r.Unshaped + r.Blocked + r.Unblocked + r.Failed
}

// Owners are the effect owners a reconcile covers.
var Owners = []string{"dhcp", "shaper", "firewall"}

// Reconcile brings the owners' state in line with the stored clients,
// both ways: a stored client whose reservation, shaping or block is
// missing or different gets it, and a reservation, shaping or block held
// for a MAC that is no stored client (or no longer needs it) is removed.
// Each owner is paged through once; an owner that does not answer is
// skipped (Skipped) and left for the next reconcile. only, when not
// empty, limits it to those owners.
func (b *Book) Reconcile(ctx context.Context, only ...string) (ReconcileResult, error) {
	res := ReconcileResult{Skipped: map[string]string{}}
	want := map[string]bool{}
	for _, o := range Owners {
		want[o] = len(only) == 0
	}
	for _, o := range only {
		want[o] = true
	}
	// What the owners hold, by MAC.
	resv := map[string]api.ClientReservation{}
	shapes := map[string]api.Shape{}
	blocks := map[string]api.Block{}
	// The three owners are paged at once: each is a service of its own.
	var wg sync.WaitGroup
	var mu sync.Mutex
	skip := func(owner string, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Skipped[owner] = err.Error()
	}
	if want["dhcp"] {
		gather(ctx, &wg, func(err error) { skip("dhcp", err) }, resv, func(after string) ([]api.ClientReservation, string, error) {
			p, err := b.d.Fx.Reservations(ctx, after)
			if err != nil {
				return nil, "", err
			}
			return p.Clients, p.Next, nil
		}, func(r api.ClientReservation) (string, bool) { return r.MAC, true })
	}
	if want["shaper"] {
		gather(ctx, &wg, func(err error) { skip("shaper", err) }, shapes, func(after string) ([]api.Shape, string, error) {
			p, err := b.d.Fx.Shapes(ctx, after)
			if err != nil {
				return nil, "", err
			}
			return p.Shapes, p.Next, nil
		}, func(s api.Shape) (string, bool) { return s.ID, isStoredMAC(s.ID) })
	}
	if want["firewall"] {
		gather(ctx, &wg, func(err error) { skip("firewall", err) }, blocks, func(after string) ([]api.Block, string, error) {
			p, err := b.d.Fx.Blocks(ctx, after)
			if err != nil {
				return nil, "", err
			}
			return p.Blocks, p.Next, nil
		}, func(x api.Block) (string, bool) { return x.ID, isStoredMAC(x.ID) })
	}
	wg.Wait()
	for o := range res.Skipped {
		want[o] = false
	}
	rates := map[string][2]int64{}
	fail := func(what, mac string, err error) {
		res.Failed++
		b.d.Log.Warn("client effect not reconciled", "owner", what, "mac", mac, "err", err)
	}
	err := b.eachRev(ctx, func(c *api.Client, rev int64) error {
		res.Clients++
		unlock := b.lock(c.MAC)
		defer unlock()
		// A change another replica makes meanwhile may have its owner
		// calls overtaken by these: follow the record once more after,
		// when this reconcile called an owner for the client (one read
		// per client otherwise: 100,000 reads for nothing to change).
		before := res.called()
		defer func() {
			if res.called() != before {
				b.settle(ctx, c.MAC, c, rev)
			}
		}()
		if want["dhcp"] {
			r, had := resv[c.MAC]
			delete(resv, c.MAC)
			w := reservation(c)
			if !had || r.IP != w.IP || r.IPv6 != w.IPv6 || r.Hostname != w.Hostname {
				w.Prefix6 = r.Prefix6 // a pinned prefix is dhcp's to keep
				if err := b.d.Fx.Reserve(ctx, w); err != nil {
					fail("dhcp", c.MAC, err)
				} else {
					res.Reserved++
				}
			}
		}
		if want["shaper"] {
			s, had := shapes[c.MAC]
			delete(shapes, c.MAC)
			switch {
			case c.Plan == nil && had:
				if err := b.d.Fx.Unshape(ctx, c.MAC); err != nil {
					fail("shaper", c.MAC, err)
				} else {
					res.Unshaped++
				}
			case c.Plan != nil:
				r, ok := rates[*c.Plan]
				if !ok {
					p, err := b.d.Plans.Get(ctx, *c.Plan)
					if err != nil {
						fail("shaper", c.MAC, err)
						break
					}
					r = [2]int64{p.DownMbps, p.UpMbps}
					rates[*c.Plan] = r
				}
				w := shapeAt(c, r[0], r[1])
				if !had || !sameShape(s, *w) {
					if err := b.d.Fx.Shape(ctx, w); err != nil {
						fail("shaper", c.MAC, err)
					} else {
						res.Shaped++
					}
				}
			}
		}
		if want["firewall"] {
			x, had := blocks[c.MAC]
			delete(blocks, c.MAC)
			w := block(c)
			switch {
			case w == nil && had:
				if err := b.d.Fx.Unblock(ctx, c.MAC); err != nil {
					fail("firewall", c.MAC, err)
				} else {
					res.Unblocked++
				}
			case w != nil && (!had || !sameBlock(x, *w)):
				if err := b.d.Fx.Block(ctx, w); err != nil {
					fail("firewall", c.MAC, err)
				} else {
					res.Blocked++
				}
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	// What is left belongs to no stored client. A client added meanwhile
	// holds its lock until its effects are applied and is read here again.
	for mac := range resv {
		if b.stored(ctx, mac) {
			continue
		}
		if _, err := b.d.Fx.Unreserve(ctx, mac); err != nil {
			fail("dhcp", mac, err)
		} else {
			res.Unreserved++
		}
	}
	for mac := range shapes {
		if b.stored(ctx, mac) {
			continue
		}
		if err := b.d.Fx.Unshape(ctx, mac); err != nil {
			fail("shaper", mac, err)
		} else {
			res.Unshaped++
		}
	}
	for mac := range blocks {
		if b.stored(ctx, mac) {
			continue
		}
		if err := b.d.Fx.Unblock(ctx, mac); err != nil {
			fail("firewall", mac, err)
		} else {
			res.Unblocked++
		}
	}
	return res, nil
}

// stored reports whether a client of that MAC is stored, holding its lock
// so that an add in flight finishes first.
func (b *Book) stored(ctx context.Context, mac string) bool {
	unlock := b.lock(mac)
	defer unlock()
	resp, err := b.d.St.Client().Get(ctx, b.k.client(mac))
	return err != nil || len(resp.Kvs) > 0 // unsure: keep
}

// gather pages one owner through on a goroutine of its own (wg), keeping
// what it holds in held by the MAC key gives; an entry key refuses is
// left out. A failure goes to skip.
func gather[T any](ctx context.Context, wg *sync.WaitGroup, skip func(error), held map[string]T,
	page func(after string) ([]T, string, error), key func(T) (string, bool)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := pageAll(ctx, func(after string) (string, error) {
			items, next, err := page(after)
			if err != nil {
				return "", err
			}
			for _, it := range items {
				if k, ok := key(it); ok {
					held[k] = it
				}
			}
			return next, nil
		}); err != nil {
			skip(err)
		}
	}()
}

// isStoredMAC says whether s is a MAC in the form clients are stored by:
// a shaping or block keyed otherwise is no client's.
func isStoredMAC(s string) bool {
	m, err := NormalizeMAC(s)
	return err == nil && m == s
}

func pageAll(ctx context.Context, page func(after string) (string, error)) error {
	after := ""
	for i := 0; ; i++ {
		next, err := page(after)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		if next == after || i > 1_000_000 {
			return fmt.Errorf("paging does not advance at %q", next)
		}
		after = next
	}
}

// sameShape compares a shape as the shaper answers it with the one a client
// needs: an IPv6 address may come back as its /128 prefix.
func sameShape(a, b api.Shape) bool {
	a.Prefix6, b.Prefix6 = canonPrefix(a.Prefix6), canonPrefix(b.Prefix6)
	return a == b
}

func canonPrefix(s string) string {
	if s == "" {
		return ""
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked().String()
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()).String()
	}
	return s
}

// sameBlock compares blocks the same way.
func sameBlock(a, b api.Block) bool {
	a.IPv6, b.IPv6 = canonPrefix(a.IPv6), canonPrefix(b.IPv6)
	return a == b
}
