package firewall

import (
	"context"
	"net/netip"
	"sort"
	"strings"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/firewall/nft"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// The ban service (Document 1, "Protection", Authentication rule 5): the
// gateway reports each failed authentication over the bus
// (api.FirewallAuthFailed: the caller's address and the time, never the
// key); MaxRetry failures of one address within FindTime ban it for
// BanTime, doubled for each earlier ban of the same address up to
// MaxBanTime (fail2ban's bantime.increment), by one element of ban4 or ban6
// with that timeout: the kernel drops it on the management ports and
// lifts the ban by itself. Loopback and allow-listed addresses are never
// banned. Each ban is stored under /router/firewall/bans/<address> with its
// end, so a restart puts it back with the time it has left; a record stays
// HistoryTime past its end so that a returning offender's ban grows.

// BanConfig tunes the ban engine; zero fields take fail2ban's defaults.
type BanConfig struct {
	// Off stops the engine: GET /fail2ban says running false and failures
	// are ignored (stored bans are not applied).
	Off bool
	// MaxRetry failures within FindTime ban the address (5, 10 minutes).
	MaxRetry int
	FindTime time.Duration
	// BanTime is the first ban's length (1 hour); each later ban of the
	// same address doubles it, up to MaxBanTime (1 week).
	BanTime    time.Duration
	MaxBanTime time.Duration
	// HistoryTime is how long a ban is remembered past its end (7 days).
	HistoryTime time.Duration
}

func (c BanConfig) withDefaults() BanConfig {
	if c.MaxRetry <= 0 {
		c.MaxRetry = 5
	}
	if c.FindTime <= 0 {
		c.FindTime = 10 * time.Minute
	}
	if c.BanTime <= 0 {
		c.BanTime = time.Hour
	}
	if c.MaxBanTime <= 0 {
		c.MaxBanTime = 7 * 24 * time.Hour
	}
	if c.MaxBanTime < c.BanTime {
		c.MaxBanTime = c.BanTime
	}
	if c.HistoryTime <= 0 {
		c.HistoryTime = 7 * 24 * time.Hour
	}
	return c
}

// Jail is the name of the API's jail.
const Jail = "routerd-api"

// banRec is one stored ban.
type banRec struct {
	IP       string `json:"ip"`
	Jail     string `json:"jail"`
	BannedAt string `json:"banned_at"`
	Until    string `json:"until"`
	Bans     int    `json:"bans" doc:"how many times this address was banned (the ban length doubles each time)"`
	Port     int    `json:"port,omitempty"`
	Unbanned string `json:"unbanned,omitempty"`
}

func (r banRec) until() time.Time {
	t, _ := time.Parse(time.RFC3339, r.Until)
	return t
}

// jailRec counts a jail's bans over its life.
type jailRec struct {
	Jail        string `json:"jail"`
	TotalBanned int    `json:"total_banned"`
}

type banEngine struct {
	s   *Service
	cfg BanConfig
	// jail names it; dir is its store directory (bans for the API's,
	// bans-<jail> for others); set4 and set6 its kernel sets.
	jail, dir, set4, set6 string
	// Guarded by s.mu.
	fails map[netip.Addr][]time.Time
	bans  map[netip.Addr]banRec
	total int
}

func newBanEngine(s *Service, c BanConfig) *banEngine {
	return &banEngine{s: s, cfg: c.withDefaults(), fails: map[netip.Addr][]time.Time{}, bans: map[netip.Addr]banRec{},
		jail: Jail, dir: "bans", set4: nft.SetBan4, set6: nft.SetBan6}
}

func (e *banEngine) banKey(a netip.Addr) string { return e.s.st.Key(e.dir, a.String()) }
func (e *banEngine) jailKey() string            { return e.s.st.Key("jails", e.jail) }

// load reads the stored bans (under s.mu).
func (e *banEngine) load(ctx context.Context) error {
	items, err := store.List[banRec](ctx, e.s.st, e.s.st.Key(e.dir)+"/")
	if err != nil {
		return err
	}
	e.bans = map[netip.Addr]banRec{}
	e.fails = map[netip.Addr][]time.Time{}
	for _, it := range items {
		a, err := netip.ParseAddr(it.Value.IP)
		if err != nil {
			e.s.deps.Log.Warn("stored ban refused", "key", it.Key, "err", err)
			continue
		}
		e.bans[a.Unmap()] = it.Value
	}
	j, _, err := store.Get[jailRec](ctx, e.s.st, e.jailKey())
	if err != nil && err != store.ErrNotFound {
		return err
	}
	e.total = j.TotalBanned
	return nil
}

// active lists the addresses banned now, in order.
func (e *banEngine) active() []netip.Addr {
	now := e.s.deps.Now()
	var out []netip.Addr
	for a, r := range e.bans {
		if r.Unbanned == "" && r.until().After(now) {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

func (e *banEngine) count() int { return len(e.active()) }

// elements are the ban sets' elements with the time each has left.
func (e *banEngine) elements() (v4, v6 []nft.Element) {
	if e.cfg.Off {
		return nil, nil
	}
	now := e.s.deps.Now()
	for _, a := range e.active() {
		el := nft.Element{Prefix: netip.PrefixFrom(a, a.BitLen()), Comment: e.jail, Timeout: left(e.bans[a].until(), now)}
		if a.Is4() {
			v4 = append(v4, el)
		} else {
			v6 = append(v6, el)
		}
	}
	return v4, v6
}

// left is the time until end, in whole seconds, at least one.
func left(end, now time.Time) time.Duration {
	d := end.Sub(now).Round(time.Second)
	if d < time.Second {
		d = time.Second
	}
	return d
}

func (e *banEngine) setOf(a netip.Addr) string {
	if a.Is4() {
		return e.set4
	}
	return e.set6
}

// AuthFailed takes one failure reported by the gateway.
func (s *Service) AuthFailed(ctx context.Context, in *api.AuthFailure) (*api.None, error) {
	a, err := netip.ParseAddr(in.Addr)
	if err != nil {
		return nil, apierr.Invalid("addr", "addr must be an IP address")
	}
	if err := s.bans.failure(ctx, a, in.Port, in.Time); err != nil {
		return nil, err
	}
	return &api.None{}, nil
}

// failure counts one failure of a and bans it at the jail's limit.
func (e *banEngine) failure(ctx context.Context, a netip.Addr, port int, when string) error {
	s := e.s
	a = a.Unmap().WithZone("")
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.cfg.Off || s.w == nil || a.IsLoopback() || a.IsUnspecified() || s.allowed(a) {
		return nil
	}
	now := s.deps.Now()
	if r, ok := e.bans[a]; ok && r.Unbanned == "" && r.until().After(now) {
		return nil // already banned
	}
	at := now
	if t, err := time.Parse(time.RFC3339, when); err == nil && t.Before(now) && now.Sub(t) < e.cfg.FindTime {
		at = t
	}
	kept := e.fails[a][:0]
	for _, t := range e.fails[a] {
		if now.Sub(t) < e.cfg.FindTime {
			kept = append(kept, t)
		}
	}
	kept = append(kept, at)
	e.fails[a] = kept
	if len(kept) < e.cfg.MaxRetry {
		return nil
	}
	delete(e.fails, a)
	if err := e.ban(ctx, a, port, now); err != nil {
		s.deps.Log.Error("ban failed", "addr", a, "jail", e.jail, "err", err)
		return err
	}
	return nil
}

// ban bans a (under s.mu): stored first, then the kernel element.
func (e *banEngine) ban(ctx context.Context, a netip.Addr, port int, now time.Time) error {
	prev, had := e.bans[a]
	n := 1
	if had {
		n = prev.Bans + 1
	}
	d := e.cfg.BanTime
	for i := 1; i < n && d < e.cfg.MaxBanTime; i++ {
		d *= 2
	}
	d = min(d, e.cfg.MaxBanTime)
	until := now.Add(d).Truncate(time.Second)
	rec := banRec{IP: a.String(), Jail: e.jail, BannedAt: now.UTC().Format(time.RFC3339), Until: until.UTC().Format(time.RFC3339), Bans: n, Port: port}
	w := e.s.w
	if _, err := w.Txn().Put(e.banKey(a), rec).Put(e.jailKey(), jailRec{Jail: e.jail, TotalBanned: e.total + 1}).Commit(ctx); err != nil {
		return storeErr(err)
	}
	err := e.s.k.Change(func(b *nft.Batch) {
		b.Add(e.setOf(a), nft.Element{Prefix: netip.PrefixFrom(a, a.BitLen()), Comment: e.jail, Timeout: left(until, now)})
	})
	if err != nil {
		t := w.Txn().Put(e.jailKey(), jailRec{Jail: e.jail, TotalBanned: e.total})
		if had {
			t.Put(e.banKey(a), prev)
		} else {
			t.Delete(e.banKey(a))
		}
		_, _ = t.Commit(context.WithoutCancel(ctx))
		return apierr.Internal(err.Error(), "the kernel refused the ban")
	}
	e.bans[a] = rec
	e.total++
	e.s.deps.Log.Warn("address banned after repeated authentication failures", "addr", a, "jail", e.jail, "for", d, "bans", n)
	e.s.pub.Publish(api.BanAdded, nil, rec)
	return nil
}

// Fail2banStatus answers GET /fail2ban.
func (s *Service) Fail2banStatus(ctx context.Context, _ *api.None) (*api.Fail2banStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bans.cfg.Off {
		return &api.Fail2banStatus{Running: false, Jails: []api.Jail{}}, nil
	}
	out := &api.Fail2banStatus{Running: s.w != nil, Jails: []api.Jail{}}
	for _, e := range s.jails() {
		ips := []string{}
		for _, a := range e.active() {
			ips = append(ips, a.String())
		}
		out.Jails = append(out.Jails, api.Jail{Jail: e.jail, CurrentlyBanned: len(ips), TotalBanned: e.total, BannedIPs: ips})
	}
	return out, nil
}

// jails are the running ban engines: the API's, and sshd's when its log
// is followed.
func (s *Service) jails() []*banEngine {
	out := []*banEngine{s.bans}
	if s.sshBans != nil {
		out = append(out, s.sshBans)
	}
	return out
}

// Fail2banUnban lifts a ban: 200 (also when the address is not banned,
// saying so), 500 with detail when the kernel or the store refuses.
func (s *Service) Fail2banUnban(ctx context.Context, in *api.Fail2banUnban) (*api.Fail2banAnswer, error) {
	a, err := netip.ParseAddr(in.Unban)
	if err != nil || a.Zone() != "" {
		return nil, apierr.Invalid("unban", "unban must be an IPv4 or IPv6 address")
	}
	a = a.Unmap()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return nil, apierr.Unavailable("firewall: not serving yet")
	}
	now := s.deps.Now()
	var lifted []string
	for _, e := range s.jails() {
		delete(e.fails, a)
		r, ok := e.bans[a]
		if !ok || r.Unbanned != "" || !r.until().After(now) {
			continue
		}
		rec := r
		rec.Unbanned = now.UTC().Format(time.RFC3339)
		if _, err := s.w.Txn().Put(e.banKey(a), rec).Commit(ctx); err != nil {
			ae := apierr.From(storeErr(err))
			return nil, ae.With("detail", err.Error())
		}
		if err := s.k.Change(func(b *nft.Batch) {
			b.Delete(e.setOf(a), nft.Element{Prefix: netip.PrefixFrom(a, a.BitLen())})
		}); err != nil && s.kernelHas(e.setOf(a), a) {
			_, _ = s.w.Txn().Put(e.banKey(a), r).Commit(context.WithoutCancel(ctx))
			return nil, apierr.Internal(err.Error(), "unban of %s failed", a)
		}
		e.bans[a] = rec
		lifted = append(lifted, e.jail)
	}
	if len(lifted) == 0 {
		return &api.Fail2banAnswer{Result: api.Result{Message: a.String() + " is not banned"}, Detail: "not banned in any jail"}, nil
	}
	return &api.Fail2banAnswer{Result: api.Result{Message: a.String() + " unbanned"}, Detail: "unbanned from " + strings.Join(lifted, ", ")}, nil
}

// kernelHas reports whether set holds a (an element the kernel timed out
// meanwhile is not an unban failure).
func (s *Service) kernelHas(set string, a netip.Addr) bool {
	els, err := s.k.Elements(set)
	if err != nil {
		return true
	}
	for _, e := range els {
		if e.Prefix.Addr() == a {
			return true
		}
	}
	return false
}

// expire forgets, every minute, the bans whose history ended and the
// failures older than FindTime, until ctx ends.
func (e *banEngine) expire(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.s.mu.Lock()
		now := e.s.deps.Now()
		var old []netip.Addr
		for a, r := range e.bans {
			if now.Sub(r.until()) > e.cfg.HistoryTime {
				old = append(old, a)
			}
		}
		for a, ts := range e.fails {
			if len(ts) == 0 || now.Sub(ts[len(ts)-1]) >= e.cfg.FindTime {
				delete(e.fails, a)
			}
		}
		w := e.s.w
		e.s.mu.Unlock()
		for _, a := range old {
			if _, err := w.Txn().Delete(e.banKey(a)).Commit(ctx); err == nil {
				e.s.mu.Lock()
				delete(e.bans, a)
				e.s.mu.Unlock()
			}
		}
	}
}
