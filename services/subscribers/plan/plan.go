// Package plan keeps the speed plans: named download/upload rates that
// clients and fibre services refer to. It validates, stores in etcd and
// refuses to delete a plan that is in use.
package plan

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"time"

	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Plan is one speed plan as stored and answered.
type Plan struct {
	Name     string `json:"name"`
	DownMbps int64  `json:"down_mbps"`
	UpMbps   int64  `json:"up_mbps"`
	Comment  string `json:"comment"`
	Created  string `json:"created"`
}

// Listed is a plan in GET /plans, with how many MAC clients use it.
type Listed struct {
	Plan
	Clients int `json:"clients"`
}

// Limits of the spec (Document 2, Limits).
const (
	MinRate       = 1
	MaxRate       = 100000
	MaxComment    = 200
	TimeLayout    = "2006-01-02 15:04:05"
	clientsPrefix = "clients"
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

// Input is a create-or-replace request.
type Input struct {
	Name     string
	DownMbps int64
	UpMbps   int64
	Comment  string
	// HasDown and HasUp say whether the rates were sent at all.
	HasDown, HasUp bool
}

// Validate checks the fields against the spec and names the first bad one.
func (in Input) Validate() error {
	if in.Name == "" {
		return apierr.Invalid("name", "name is required")
	}
	if !namePattern.MatchString(in.Name) {
		return apierr.Invalid("name", "invalid plan name %q: use 1-40 letters, digits, _ or -", in.Name)
	}
	for _, r := range []struct {
		field string
		has   bool
		v     int64
	}{{"down_mbps", in.HasDown, in.DownMbps}, {"up_mbps", in.HasUp, in.UpMbps}} {
		if !r.has {
			return apierr.Invalid(r.field, "%s is required (integer %d-%d)", r.field, MinRate, MaxRate)
		}
		if r.v < MinRate || r.v > MaxRate {
			return apierr.Invalid(r.field, "%s %d out of range %d-%d", r.field, r.v, MinRate, MaxRate)
		}
	}
	if len(in.Comment) > MaxComment {
		return apierr.Invalid("comment", "comment longer than %d characters", MaxComment)
	}
	return nil
}

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
func (b *Book) List(ctx context.Context) ([]Listed, error) {
	items, err := store.List[Plan](ctx, b.st, b.st.Key("plans")+"/")
	if err != nil {
		return nil, err
	}
	users, err := b.users(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Listed, 0, len(items))
	for _, it := range items {
		out = append(out, Listed{Plan: it.Value, Clients: len(users[it.Value.Name])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns one plan.
func (b *Book) Get(ctx context.Context, name string) (Plan, error) {
	p, _, err := store.Get[Plan](ctx, b.st, b.key(name))
	if errors.Is(err, store.ErrNotFound) {
		return p, apierr.NotFound("No such plan: %s", name)
	}
	return p, err
}

// Put creates the plan or replaces its rates and comment. created says
// which happened. A concurrent writer of the same plan makes it retry on
// the fresh document rather than overwrite blindly.
func (b *Book) Put(ctx context.Context, in Input) (p Plan, created bool, err error) {
	if err := in.Validate(); err != nil {
		return p, false, err
	}
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
func (b *Book) Delete(ctx context.Context, name string) (Plan, error) {
	if name == "" {
		return Plan{}, apierr.Invalid("name", "name is required")
	}
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

// ClientCount is the number of registered MAC clients.
func (b *Book) ClientCount(ctx context.Context) (int64, error) {
	return b.st.Count(ctx, b.st.Key(clientsPrefix)+"/")
}
