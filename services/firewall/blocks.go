package firewall

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"sort"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/firewall/nft"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// Suspension blocks (Document 2, "Client suspension"; api.FirewallBlock):
// one record per subscriber under /router/firewall/blocks/<id>, its IPv4
// address one element of block4 and its IPv6 address or delegated prefix
// one element of block6. The forward chain drops what they send and what
// is sent to them; the input chain is not touched, so DHCP to the router
// still answers them.

// blockRec is a stored block with its parsed addresses.
type blockRec struct {
	api.Block
	ip  netip.Addr
	ip6 netip.Prefix // invalid when none
}

func (s *Service) blockKey(id string) string { return s.st.Key("blocks", url.PathEscape(id)) }

func (s *Service) loadBlocks(ctx context.Context) (map[string]blockRec, error) {
	items, err := store.List[api.Block](ctx, s.st, s.st.Key("blocks")+"/")
	if err != nil {
		return nil, err
	}
	out := make(map[string]blockRec, len(items))
	for _, it := range items {
		r, err := parseBlock(it.Value)
		if err != nil {
			s.deps.Log.Warn("stored block refused: left out of the kernel", "key", it.Key, "err", err)
			continue
		}
		out[r.ID] = r
	}
	return out, nil
}

// parseBlock checks what the field rules cannot (the IPv6 field holds an
// IPv6 address or prefix) and normalises the addresses and the MAC.
func parseBlock(b api.Block) (blockRec, error) {
	r := blockRec{Block: b}
	r.ID = strings.TrimSpace(b.ID)
	if r.ID == "" || len(r.ID) > 128 {
		return r, apierr.Invalid("id", "id must be 1-128 characters")
	}
	ip, err := netip.ParseAddr(b.IP)
	if err != nil || !ip.Is4() {
		return r, apierr.Invalid("ip", "ip must be an IPv4 address")
	}
	r.ip, r.IP = ip, ip.String()
	if b.IPv6 != "" {
		p, err := netip.ParsePrefix(b.IPv6)
		if err != nil {
			a, aerr := netip.ParseAddr(b.IPv6)
			if aerr != nil {
				return r, apierr.Invalid("ipv6", "ipv6 must be an IPv6 address or prefix")
			}
			p = netip.PrefixFrom(a, 128)
		}
		if !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return r, apierr.Invalid("ipv6", "ipv6 must be an IPv6 address or prefix")
		}
		r.ip6 = p.Masked()
		if r.ip6.Bits() == 128 {
			r.IPv6 = r.ip6.Addr().String()
		} else {
			r.IPv6 = r.ip6.String()
		}
	}
	if b.MAC != "" {
		r.MAC = normMAC(b.MAC)
	}
	return r, nil
}

// normMAC writes a MAC in the spec's form, AA:BB:CC:DD:EE:FF.
func normMAC(m string) string {
	hex := strings.NewReplacer(":", "", "-", "", ".", "").Replace(strings.ToUpper(m))
	if len(hex) != 12 {
		return strings.ToUpper(m)
	}
	var b strings.Builder
	for i := 0; i < 12; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(hex[i : i+2])
	}
	return b.String()
}

// blockElements are the kernel's elements for the blocks: each address or
// prefix once (two blocks of one address share its element; a prefix
// inside another is held by the wider one), commented with the first id.
func (s *Service) blockElements() (v4, v6 []nft.Element) {
	return blockElementsOf(s.blocks)
}

func blockElementsOf(blocks map[string]blockRec) (v4, v6 []nft.Element) {
	ids := make([]string, 0, len(blocks))
	for id := range blocks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := blocks[id]
		v4 = append(v4, nft.Element{Prefix: netip.PrefixFrom(r.ip, 32), Comment: id})
		if r.ip6.IsValid() {
			v6 = append(v6, nft.Element{Prefix: r.ip6, Comment: id})
		}
	}
	return nft.Cover(v4), nft.Cover(v6)
}

// Block puts one block (api.FirewallBlock): 201 new, 200 changed or
// unchanged.
func (s *Service) Block(ctx context.Context, in *api.Block) (*api.BlockAnswer, error) {
	r, err := parseBlock(*in)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return nil, apierr.Unavailable("firewall: not serving yet")
	}
	old, had := s.blocks[r.ID]
	if had && old.Block == r.Block {
		b := r.Block
		return &api.BlockAnswer{Result: api.Result{Code: 200, Message: "Already blocked"}, Block: &b}, nil
	}
	if _, err := s.w.Txn().Put(s.blockKey(r.ID), r.Block).Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	next := cloneBlocks(s.blocks)
	next[r.ID] = r
	if err := s.applyBlocks(next); err != nil {
		// Take the stored change out again.
		t := s.w.Txn()
		if had {
			t.Put(s.blockKey(r.ID), old.Block)
		} else {
			t.Delete(s.blockKey(r.ID))
		}
		if _, rerr := t.Commit(context.WithoutCancel(ctx)); rerr != nil {
			s.deps.Log.Error("block refused by the kernel and its record could not be taken out", "id", r.ID, "err", rerr)
		}
		return nil, apierr.Internal(err.Error(), "the kernel refused the block")
	}
	s.blocks = next
	b := r.Block
	s.pub.Publish(api.BlockSet, nil, b)
	if had {
		return &api.BlockAnswer{Result: api.Result{Code: 200, Message: "Block changed"}, Block: &b}, nil
	}
	return &api.BlockAnswer{Result: api.Result{Message: "Blocked"}, Block: &b}, nil
}

// Unblock removes one block (api.FirewallUnblock); 404 when none.
func (s *Service) Unblock(ctx context.Context, in *api.BlockRef) (*api.BlockAnswer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return nil, apierr.Unavailable("firewall: not serving yet")
	}
	id := strings.TrimSpace(in.ID)
	old, had := s.blocks[id]
	if !had {
		return nil, apierr.NotFound("%s is not blocked", id)
	}
	if _, err := s.w.Txn().Delete(s.blockKey(id)).Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	next := cloneBlocks(s.blocks)
	delete(next, id)
	if err := s.applyBlocks(next); err != nil {
		if _, rerr := s.w.Txn().Put(s.blockKey(id), old.Block).Commit(context.WithoutCancel(ctx)); rerr != nil {
			s.deps.Log.Error("unblock refused by the kernel and its record could not be put back", "id", id, "err", rerr)
		}
		return nil, apierr.Internal(err.Error(), "the kernel refused the unblock")
	}
	s.blocks = next
	b := old.Block
	s.pub.Publish(api.BlockRemoved, nil, b)
	return &api.BlockAnswer{Result: api.Result{Message: "Unblocked"}, Block: &b}, nil
}

// Blocks pages the blocks in id order (api.FirewallBlocks).
func (s *Service) Blocks(ctx context.Context, in *api.BlockPageRequest) (*api.BlockPage, error) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.blocks))
	for id := range s.blocks {
		if id > in.After {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	limit := in.Limit
	if limit <= 0 {
		limit = 5000
	}
	out := &api.BlockPage{Blocks: []api.Block{}}
	for i, id := range ids {
		if i == limit {
			out.Next = ids[i-1]
			break
		}
		out.Blocks = append(out.Blocks, s.blocks[id].Block)
	}
	s.mu.Unlock()
	out.Count = len(out.Blocks)
	return out, nil
}

// applyBlocks changes the kernel from the current blocks to next: only
// the elements that differ, in one transaction.
func (s *Service) applyBlocks(next map[string]blockRec) error {
	b4, b6 := s.blockElements()
	n4, n6 := blockElementsOf(next)
	return s.k.Change(func(b *nft.Batch) {
		b.Sync(nft.SetBlock4, b4, n4)
		b.Sync(nft.SetBlock6, b6, n6)
	})
}

func cloneBlocks(m map[string]blockRec) map[string]blockRec {
	out := make(map[string]blockRec, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// storeErr turns a store failure into the answer's kind.
func storeErr(err error) error {
	switch {
	case errors.Is(err, store.ErrLockLost):
		return apierr.Unavailable("firewall: this replica no longer holds the host lock; retry")
	case errors.Is(err, store.ErrConflict):
		return apierr.Conflict("changed concurrently; retry")
	}
	return apierr.Internal(err.Error(), "firewall: the store refused the change")
}
