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
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Plan is one speed plan as stored and answered.
type Plan = api.Plan

// TimeLayout is how timestamps are written in answers.
const TimeLayout = "2006-01-02 15:04:05"

// UseKey is the index key saying that the client mac uses plan p and sits
// on network (written by the clients area in the client's own
// transaction; None for no plan or no network, a / of the network
// written _). A plan's users are counted and listed from the keys under
// its prefix, DELETE /plans commits only while none is there, and the
// per-network counts of GET /status come from one keys-only read of
// them all. One key for both memberships rather than one each: a
// restore onto new hardware writes every key, and etcd's apply is what
// bounds it.
func UseKey(st *store.Store, p, network, mac string) string {
	if p == "" {
		p = None
	}
	if network == "" {
		network = None
	}
	return st.Key("index", "use", p, strings.ReplaceAll(network, "/", "_"), mac)
}

// None stands for no plan or no network in a UseKey (no plan is named
// so: names are letters, digits, _ and -).
const None = "~"

// UsesPrefix is the prefix of every UseKey.
func UsesPrefix(st *store.Store) string { return st.Key("index", "use") + "/" }

// ParseUse reads a UseKey's plan, network and MAC (the network as
// written, with _ for /).
func ParseUse(st *store.Store, key string) (p, network, mac string, ok bool) {
	rest, ok := strings.CutPrefix(key, UsesPrefix(st))
	if !ok {
		return "", "", "", false
	}
	p, rest, ok1 := strings.Cut(rest, "/")
	network, mac, ok2 := strings.Cut(rest, "/")
	return p, network, mac, ok1 && ok2
}

func usersPrefix(st *store.Store, p string) string { return st.Key("index", "use", p) + "/" }

// macOfUse is the MAC at the end of a UseKey.
func macOfUse(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }

// Book is the plan store of the subscribers service.
type Book struct {
	st  *store.Store
	now func() time.Time
	// OLTSync, when set, starts bringing the registered OLTs in step
	// with the plans in the background and says how many there are.
	OLTSync func(ctx context.Context) (int, error)
	// Reshape, when set, gives every shaped subscriber of a plan its new
	// rates (the shaper's plans.rates); a replace whose reshape fails is
	// undone.
	Reshape func(ctx context.Context, p Plan) error
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
	out := make([]api.PlanListed, 0, len(items))
	for _, it := range items {
		n, err := b.st.Count(ctx, usersPrefix(b.st, it.Value.Name))
		if err != nil {
			return nil, err
		}
		out = append(out, api.PlanListed{Plan: it.Value, Clients: int(n)})
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
	p, old, rev, created, err := b.put(ctx, in)
	if err != nil {
		return nil, err
	}
	if !created && b.Reshape != nil && (p.DownMbps != old.DownMbps || p.UpMbps != old.UpMbps) {
		if err := b.reshape(ctx, p, old, rev); err != nil {
			return nil, err
		}
	}
	a := &api.PlanPutAnswer{Plan: p, OLT: b.oltSync(ctx)}
	a.Code, a.Message = http.StatusCreated, "Plan created"
	if !created {
		a.Code, a.Message = http.StatusOK, "Plan updated"
	}
	return a, nil
}

func (b *Book) put(ctx context.Context, in *api.PlanPut) (p, old Plan, newRev int64, created bool, err error) {
	for attempt := 0; attempt < 5; attempt++ {
		var rev int64
		var gerr error
		old, rev, gerr = store.Get[Plan](ctx, b.st, b.key(in.Name))
		switch {
		case errors.Is(gerr, store.ErrNotFound):
			rev = 0
			p = Plan{Name: in.Name, Created: b.now().Format(TimeLayout)}
		case gerr != nil:
			return p, old, 0, false, gerr
		default:
			p = old
		}
		p.DownMbps, p.UpMbps, p.Comment = in.DownMbps, in.UpMbps, in.Comment
		newRev, err = b.st.Txn().IfRevision(b.key(in.Name), rev).Put(b.key(in.Name), p).Commit(ctx)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return p, old, newRev, rev == 0, err
	}
	return p, old, 0, false, apierr.Conflict("plan %s is being changed by another request; try again", in.Name)
}

// RollbackBudget is what a reshape leaves of its request for the rollback
// when the shaper fails (the old rates stored again and, when the shaper
// did not answer, given to it again). api.PlansPut's timeout is the
// shaper's plans.rates timeout plus this: a plan held by 100,000 clients
// must not be cut short by the request's own default timeout.
const RollbackBudget = time.Minute

// reshape asks the shaper to give the plan's users the new rates; when it
// cannot, the plan's old rates are put back (unless the plan changed again
// meanwhile) and the error answered. The shaper has the request's time
// less the rollback's (a third of what is left at most), so a reshape
// that does not answer leaves time to undo it and answer.
func (b *Book) reshape(ctx context.Context, p, old Plan, rev int64) error {
	n, err := b.st.Count(ctx, usersPrefix(b.st, p.Name))
	if err != nil || n == 0 {
		return err
	}
	rctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(ctx, dl.Add(-min(RollbackBudget, time.Until(dl)/3)))
		defer cancel()
	}
	rerr := b.Reshape(rctx, p)
	if rerr == nil {
		return nil
	}
	// The rollback runs past the request's deadline when the request had
	// less than the budget left.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RollbackBudget)
	defer cancel()
	if _, err := b.st.Txn().IfRevision(b.key(p.Name), rev).Put(b.key(p.Name), old).Commit(bctx); err != nil {
		return apierr.Internal(rerr.Error(), "plan %s: its clients could not be reshaped, and the old rates could not be put back: %v", p.Name, err)
	}
	var ae *apierr.Error
	if errors.As(rerr, &ae) && ae.Kind == apierr.KindUnavailable {
		// No answer is not no change: the shaper may have applied the new
		// rates all the same, so it is given the old ones again.
		if err := b.Reshape(bctx, old); err != nil {
			return apierr.New(apierr.KindUnavailable, "plan %s: the shaper does not answer; the plan is rolled back, its subscribers follow at the shaper's next reconcile", p.Name)
		}
		return apierr.New(apierr.KindUnavailable, "plan %s: the shaper does not answer; rolled back", p.Name)
	}
	return apierr.Internal(rerr.Error(), "plan %s: its %d clients could not be reshaped; rolled back", p.Name, n)
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
	if err := b.inUse(ctx, name); err != nil {
		return p, err
	}
	// The same transaction checks that no client took the plan meanwhile:
	// a client's add commits its index key only while the plan is there.
	pfx := usersPrefix(b.st, name)
	resp, err := b.st.Client().Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(b.key(name)), "=", rev),
		clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix(),
	).Then(clientv3.OpDelete(b.key(name))).Commit()
	if err != nil {
		return p, fmt.Errorf("plans: delete %s: %w", name, err)
	}
	if !resp.Succeeded {
		if err := b.inUse(ctx, name); err != nil {
			return p, err
		}
		return p, apierr.Conflict("plan %s changed while being deleted; try again", name)
	}
	return p, nil
}

// inUse is the 409 listing the MACs of the plan's clients, nil when none.
func (b *Book) inUse(ctx context.Context, name string) error {
	pfx := usersPrefix(b.st, name)
	resp, err := b.st.Client().Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("plans: reading the users of %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	macs := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		macs = append(macs, macOfUse(string(kv.Key)))
	}
	sort.Strings(macs)
	return apierr.Conflict("plan %s is used by %d clients; move them to another plan first", name, len(macs)).With("clients", macs)
}

// users maps plan name to the MACs of the clients on it.
func (b *Book) users(ctx context.Context) (map[string][]string, error) {
	resp, err := b.st.Client().Get(ctx, UsesPrefix(b.st), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("plans: reading the plans' users: %w", err)
	}
	m := map[string][]string{}
	for _, kv := range resp.Kvs {
		if name, _, mac, ok := ParseUse(b.st, string(kv.Key)); ok && name != None {
			m[name] = append(m[name], mac)
		}
	}
	return m, nil
}
