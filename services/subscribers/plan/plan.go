// Package plan keeps the speed plans: named download/upload rates that
// clients and fibre services refer to. It validates, stores in etcd and
// refuses to delete a plan that is in use.
package plan

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Plan is one speed plan as stored and answered.
type Plan = api.Plan

// TimeLayout is how timestamps are written in answers.
const TimeLayout = "2006-01-02 15:04:05"

const clientsPrefix = "clients"

// client is the part of a stored MAC client this package reads: the plan
// it uses. The clients area owns the document; plans only count users.
type client struct {
	MAC  string  `json:"mac"`
	Plan *string `json:"plan"`
}

// Book is the plan store of the subscribers service.
type Book struct {
	st  *store.Store
	now func() time.Time
	// OLTSync, when set, starts bringing the registered OLTs in step
	// with the plans in the background and says how many there are.
	OLTSync func(ctx context.Context) (int, error)
}

// NewBook returns a plan book on st (the subscribers service's store).
func NewBook(st *store.Store, now func() time.Time) *Book {
	if now == nil {
		now = time.Now
	}
	return &Book{st: st, now: now}
}

func (b *Book) key(name string) string { return b.st.Key("plans", name) }

// List returns every plan, sorted by name, with its client count.
func (b *Book) List(ctx context.Context, _ *api.None) (*api.PlanList, error) {
	items, err := store.List[Plan](ctx, b.st, b.st.Key("plans")+"/")
	if err != nil {
		return nil, err
	}
	users, err := b.users(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.PlanListed, 0, len(items))
	for _, it := range items {
		out = append(out, api.PlanListed{Plan: it.Value, Clients: len(users[it.Value.Name])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return &api.PlanList{Count: len(out), Plans: out}, nil
}

// Get returns one plan.
func (b *Book) Get(ctx context.Context, name string) (Plan, error) {
	p, _, err := store.Get[Plan](ctx, b.st, b.key(name))
	if errors.Is(err, store.ErrNotFound) {
		return p, apierr.NotFound("No such plan: %s", name)
	}
	return p, err
}

// Put creates the plan (201 'Plan created') or replaces its rates and
// comment (200 'Plan updated'). A concurrent writer of the same plan makes
// it retry on the fresh document rather than overwrite blindly. The field
// rules are api.PlanPut's, checked before Put is called.
func (b *Book) Put(ctx context.Context, in *api.PlanPut) (*api.PlanPutAnswer, error) {
	p, created, err := b.put(ctx, in)
	if err != nil {
		return nil, err
	}
	a := &api.PlanPutAnswer{Plan: p, OLT: b.oltSync(ctx)}
	a.Code, a.Message = http.StatusCreated, "Plan created"
	if !created {
		a.Code, a.Message = http.StatusOK, "Plan updated"
	}
	return a, nil
}

func (b *Book) put(ctx context.Context, in *api.PlanPut) (p Plan, created bool, err error) {
	for attempt := 0; attempt < 5; attempt++ {
		old, rev, gerr := store.Get[Plan](ctx, b.st, b.key(in.Name))
		switch {
		case errors.Is(gerr, store.ErrNotFound):
			rev = 0
			p = Plan{Name: in.Name, Created: b.now().Format(TimeLayout)}
		case gerr != nil:
			return p, false, gerr
		default:
			p = old
		}
		p.DownMbps, p.UpMbps, p.Comment = in.DownMbps, in.UpMbps, in.Comment
		_, err = b.st.Txn().IfRevision(b.key(in.Name), rev).Put(b.key(in.Name), p).Commit(ctx)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return p, rev == 0, err
	}
	return p, false, apierr.Conflict("plan %s is being changed by another request; try again", in.Name)
}

// Delete removes the plan unless a client uses it (409 listing the MACs).
func (b *Book) Delete(ctx context.Context, in *api.PlanRef) (*api.PlanDeleteAnswer, error) {
	p, err := b.delete(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	return &api.PlanDeleteAnswer{Result: api.Result{Message: "Plan deleted"}, Plan: p, OLT: b.oltSync(ctx)}, nil
}

// oltSync is the `olt` field of plan answers: how many OLTs are brought in
// step in the background, or nil while no OLT is registered (or the olt
// service does not answer: the plan change stands either way).
func (b *Book) oltSync(ctx context.Context) any {
	if b.OLTSync == nil {
		return nil
	}
	n, err := b.OLTSync(ctx)
	if err != nil || n == 0 {
		return nil
	}
	return n
}

func (b *Book) delete(ctx context.Context, name string) (Plan, error) {
	p, rev, err := store.Get[Plan](ctx, b.st, b.key(name))
	if errors.Is(err, store.ErrNotFound) {
		return p, apierr.NotFound("No such plan: %s", name)
	}
	if err != nil {
		return p, err
	}
	users, err := b.users(ctx)
	if err != nil {
		return p, err
	}
	if macs := users[name]; len(macs) > 0 {
		sort.Strings(macs)
		return p, apierr.Conflict("plan %s is used by %d clients; move them to another plan first", name, len(macs)).With("clients", macs)
	}
	if _, err := b.st.Txn().IfRevision(b.key(name), rev).Delete(b.key(name)).Commit(ctx); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return p, apierr.Conflict("plan %s changed while being deleted; try again", name)
		}
		return p, err
	}
	return p, nil
}

// users maps plan name to the MACs of the clients on it.
func (b *Book) users(ctx context.Context) (map[string][]string, error) {
	items, err := store.List[client](ctx, b.st, b.st.Key(clientsPrefix)+"/")
	if err != nil {
		return nil, fmt.Errorf("plans: reading clients: %w", err)
	}
	m := map[string][]string{}
	for _, it := range items {
		if it.Value.Plan != nil && *it.Value.Plan != "" {
			m[*it.Value.Plan] = append(m[*it.Value.Plan], it.Value.MAC)
		}
	}
	return m, nil
}

// Summary is the client counts GET /status shows. Clients are not built
// yet: the total counts their stored records, none is online.
func (b *Book) Summary(ctx context.Context, _ *api.None) (*api.ClientCounts, error) {
	n, err := b.st.Count(ctx, b.st.Key(clientsPrefix)+"/")
	if err != nil {
		return nil, err
	}
	return &api.ClientCounts{Total: n, PerNetwork: map[string]int64{}}, nil
}
