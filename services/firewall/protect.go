package firewall

import (
	"context"
	"net/netip"
	"sort"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/firewall/nft"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// The allow-list (Document 1, "Protection"): one record per network under
// /router/firewall/protect/<address>_<length>, each network one element of
// allow4 (overlapping entries held by their cover). While the list is
// empty the guarded set is empty and the management ports accept anyone;
// its first entry fills guarded with the ports (and the last one empties
// it), in the same transaction as the element.

// allowRec is one stored allow-list entry.
type allowRec = api.ProtectEntry

// StatusOpen and StatusProtected are GET /protect's status.
const (
	StatusOpen      = "open (no restrictions)"
	StatusProtected = "protected"
)

func (s *Service) allowKey(p netip.Prefix) string {
	return s.st.Key("protect", p.Addr().String()+"_"+itoa(p.Bits()))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [4]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

func (s *Service) loadAllow(ctx context.Context) (map[netip.Prefix]allowRec, error) {
	items, err := store.List[allowRec](ctx, s.st, s.st.Key("protect")+"/")
	if err != nil {
		return nil, err
	}
	out := make(map[netip.Prefix]allowRec, len(items))
	for _, it := range items {
		p, err := parseNetwork(it.Value.Network)
		if err != nil {
			s.deps.Log.Warn("stored allow-list entry refused: left out of the kernel", "key", it.Key, "err", err)
			continue
		}
		out[p] = it.Value
	}
	return out, nil
}

// parseNetwork reads an allow-list network: an IPv4 address (/32) or an
// IPv4 prefix /0..32, host bits cleared.
func parseNetwork(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	bad := apierr.Invalid("network", "network must be an IPv4 address or address/0..32")
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() {
			return netip.Prefix{}, bad
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Prefix{}, bad
	}
	return netip.PrefixFrom(a, 32), nil
}

// allowElements are allow4's elements: the cover of the entries.
func (s *Service) allowElements() []nft.Element { return allowElementsOf(s.allow) }

func allowElementsOf(m map[netip.Prefix]allowRec) []nft.Element {
	ps := make([]netip.Prefix, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	sortPrefixes(ps)
	out := make([]nft.Element, 0, len(ps))
	for _, p := range ps {
		out = append(out, nft.Element{Prefix: p, Comment: m[p].Comment})
	}
	return nft.Cover(out)
}

func sortPrefixes(ps []netip.Prefix) {
	sort.Slice(ps, func(i, j int) bool {
		if c := ps[i].Addr().Compare(ps[j].Addr()); c != 0 {
			return c < 0
		}
		return ps[i].Bits() < ps[j].Bits()
	})
}

// entries lists the allow-list in address order.
func (s *Service) entries() []api.ProtectEntry {
	ps := make([]netip.Prefix, 0, len(s.allow))
	for p := range s.allow {
		ps = append(ps, p)
	}
	sortPrefixes(ps)
	out := make([]api.ProtectEntry, 0, len(ps))
	for _, p := range ps {
		out = append(out, s.allow[p])
	}
	return out
}

// allowed reports whether a is in an allow-list network.
func (s *Service) allowed(a netip.Addr) bool {
	a = a.Unmap()
	for p := range s.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ProtectList answers GET /protect.
func (s *Service) ProtectList(ctx context.Context, _ *api.None) (*api.ProtectList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &api.ProtectList{Port: s.deps.APIPort, Networks: s.entries(), Status: StatusOpen}
	out.Count = len(out.Networks)
	if out.Count > 0 {
		out.Status = StatusProtected
	}
	return out, nil
}

// ProtectAdd adds a network: 201, 400 invalid, 409 already allowed.
func (s *Service) ProtectAdd(ctx context.Context, in *api.ProtectAdd) (*api.ProtectAnswer, error) {
	p, err := parseNetwork(in.Network)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return nil, apierr.Unavailable("firewall: not serving yet")
	}
	if _, ok := s.allow[p]; ok {
		return nil, apierr.Conflict("%s is already allowed", p)
	}
	rec := allowRec{Network: p.String(), Comment: strings.TrimSpace(in.Comment), Added: s.deps.Now().Format("2006-01-02 15:04:05")}
	if _, err := s.w.Txn().IfAbsent(s.allowKey(p)).Put(s.allowKey(p), rec).Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	next := cloneAllow(s.allow)
	next[p] = rec
	if err := s.applyAllow(next); err != nil {
		if _, rerr := s.w.Txn().Delete(s.allowKey(p)).Commit(context.WithoutCancel(ctx)); rerr != nil {
			s.deps.Log.Error("allow-list entry refused by the kernel and its record could not be taken out", "network", p, "err", rerr)
		}
		return nil, apierr.Internal(err.Error(), "the kernel refused the allow-list change")
	}
	s.allow = next
	return &api.ProtectAnswer{Result: api.Result{Message: p.String() + " allowed"}, Networks: s.entries()}, nil
}

// ProtectDelete removes a network; 404 when not listed.
func (s *Service) ProtectDelete(ctx context.Context, in *api.ProtectRef) (*api.ProtectAnswer, error) {
	return s.protectDelete(ctx, in.Network, "")
}

// ProtectDeleteChecked is POST /network/protect-delete: 409 for 127.0.0.1
// and when the caller would lock itself out.
func (s *Service) ProtectDeleteChecked(ctx context.Context, in *api.ProtectCheckedRef) (*api.ProtectAnswer, error) {
	client := in.Client
	if client == "" {
		client = api.OriginOf(ctx).Caller
	}
	return s.protectDelete(ctx, in.Network, client)
}

func (s *Service) protectDelete(ctx context.Context, network, client string) (*api.ProtectAnswer, error) {
	p, err := parseNetwork(network)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return nil, apierr.Unavailable("firewall: not serving yet")
	}
	old, ok := s.allow[p]
	if !ok {
		return nil, apierr.NotFound("%s is not on the allow-list", p)
	}
	next := cloneAllow(s.allow)
	delete(next, p)
	if client != "" {
		if p == netip.MustParsePrefix("127.0.0.1/32") {
			return nil, apierr.Conflict("127.0.0.1 is always allowed").With("refused", []string{p.String()})
		}
		if c, err := netip.ParseAddr(client); err == nil && !c.Unmap().IsLoopback() {
			c = c.Unmap()
			still := false
			for q := range next {
				if q.Contains(c) {
					still = true
				}
			}
			if p.Contains(c) && !still {
				return nil, apierr.Conflict("the caller %s is allowed only through %s: removing it would lock the caller out", c, p).
					With("refused", []string{p.String()})
			}
		}
	}
	if _, err := s.w.Txn().Delete(s.allowKey(p)).Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	if err := s.applyAllow(next); err != nil {
		if _, rerr := s.w.Txn().Put(s.allowKey(p), old).Commit(context.WithoutCancel(ctx)); rerr != nil {
			s.deps.Log.Error("allow-list removal refused by the kernel and its record could not be put back", "network", p, "err", rerr)
		}
		return nil, apierr.Internal(err.Error(), "the kernel refused the allow-list change")
	}
	s.allow = next
	return &api.ProtectAnswer{Result: api.Result{Message: p.String() + " removed from the allow-list"}, Networks: s.entries()}, nil
}

// applyAllow changes allow4 (and guarded, when the list becomes empty or
// stops being empty) in one transaction.
func (s *Service) applyAllow(next map[netip.Prefix]allowRec) error {
	before, after := s.allowElements(), allowElementsOf(next)
	return s.k.Change(func(b *nft.Batch) {
		b.Sync(nft.SetAllow4, before, after)
		if (len(s.allow) == 0) != (len(next) == 0) {
			b.Protect(len(next) > 0)
		}
	})
}

func cloneAllow(m map[netip.Prefix]allowRec) map[netip.Prefix]allowRec {
	out := make(map[netip.Prefix]allowRec, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
