package firewall

import (
	"context"
	"net/netip"
	"sort"
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
	// Guarded by s.mu.
	fails map[netip.Addr][]time.Time
	bans  map[netip.Addr]banRec
	total int
}

func newBanEngine(s *Service, c BanConfig) *banEngine {
	return &banEngine{s: s, cfg: c.withDefaults(), fails: map[netip.Addr][]time.Time{}, bans: map[netip.Addr]banRec{}}
}

func (e *banEngine) banKey(a netip.Addr) string { return e.s.st.Key("bans", a.String()) }
func (e *banEngine) jailKey() string            { return e.s.st.Key("jails", Jail) }

// load reads the stored bans (under s.mu).
func (e *banEngine) load(ctx context.Context) error {
	items, err := store.List[banRec](ctx, e.s.st, e.s.st.Key("bans")+"/")
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
		el := nft.Element{Prefix: netip.PrefixFrom(a, a.BitLen()), Comment: e.bans[a].Jail, Timeout: left(e.bans[a].until(), now)}
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

func banSet(a netip.Addr) string {
	if a.Is4() {
		return nft.SetBan4
	}
	return nft.SetBan6
}

// AuthFailed takes one failure reported by the gateway.
func (s *Service) AuthFailed(ctx context.Context, in *api.AuthFailure) (*api.None, error) {
	a, err := netip.ParseAddr(in.Addr)
	if err != nil {
		return nil, apierr.Invalid("addr", "addr must be an IP address")
	}
	a = a.Unmap().WithZone("")
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.bans
	if e.cfg.Off || s.w == nil || a.IsLoopback() || a.IsUnspecified() || s.allowed(a) {
		return &api.None{}, nil
	}
	now := s.deps.Now()
	if r, ok := e.bans[a]; ok && r.Unbanned == "" && r.until().After(now) {
		return &api.None{}, nil // already banned
	}
	at := now
	if t, err := time.Parse(time.RFC3339, in.Time); err == nil && t.Before(now) && now.Sub(t) < e.cfg.FindTime {
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
		return &api.None{}, nil
	}
	delete(e.fails, a)
	if err := e.ban(ctx, a, in.Port, now); err != nil {
		s.deps.Log.Error("ban failed", "addr", a, "err", err)
		return nil, err
	}
	return &api.None{}, nil
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
	rec := banRec{IP: a.String(), Jail: Jail, BannedAt: now.UTC().Format(time.RFC3339), Until: until.UTC().Format(time.RFC3339), Bans: n, Port: port}
	w := e.s.w
	if _, err := w.Txn().Put(e.banKey(a), rec).Put(e.jailKey(), jailRec{Jail: Jail, TotalBanned: e.total + 1}).Commit(ctx); err != nil {
		return storeErr(err)
	}
	err := e.s.k.Change(func(b *nft.Batch) {
		b.Add(banSet(a), nft.Element{Prefix: netip.PrefixFrom(a, a.BitLen()), Comment: Jail, Timeout: left(until, now)})
	})
	if err != nil {
		t := w.Txn().Put(e.jailKey(), jailRec{Jail: Jail, TotalBanned: e.total})
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
	e.s.deps.Log.Warn("address banned after repeated authentication failures", "addr", a, "jail", Jail, "for", d, "bans", n)
	e.s.pub.Publish(api.BanAdded, nil, rec)
	return nil
}

// Fail2banStatus answers GET /fail2ban.
func (s *Service) Fail2banStatus(ctx context.Context, _ *api.None) (*api.Fail2banStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.bans
	if e.cfg.Off {
		return &api.Fail2banStatus{Running: false, Jails: []api.Jail{}}, nil
	}
	ips := []string{}
	for _, a := range e.active() {
		ips = append(ips, a.String())
	}
	return &api.Fail2banStatus{Running: s.w != nil, Jails: []api.Jail{{
		Jail: Jail, CurrentlyBanned: len(ips), TotalBanned: e.total, BannedIPs: ips}}}, nil
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
	e := s.bans
	delete(e.fails, a)
	now := s.deps.Now()
	r, ok := e.bans[a]
	if !ok || r.Unbanned != "" || !r.until().After(now) {
		return &api.Fail2banAnswer{Result: api.Result{Message: a.String() + " is not banned"}, Detail: "not banned in " + Jail}, nil
	}
	rec := r
	rec.Unbanned = now.UTC().Format(time.RFC3339)
	if _, err := s.w.Txn().Put(e.banKey(a), rec).Commit(ctx); err != nil {
		ae := apierr.From(storeErr(err))
		return nil, ae.With("detail", err.Error())
	}
	if err := s.k.Change(func(b *nft.Batch) {
		b.Delete(banSet(a), nft.Element{Prefix: netip.PrefixFrom(a, a.BitLen())})
	}); err != nil && s.kernelHas(banSet(a), a) {
		_, _ = s.w.Txn().Put(e.banKey(a), r).Commit(context.WithoutCancel(ctx))
		return nil, apierr.Internal(err.Error(), "unban of %s failed", a)
	}
	e.bans[a] = rec
	return &api.Fail2banAnswer{Result: api.Result{Message: a.String() + " unbanned"}, Detail: "unbanned from " + Jail}, nil
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
