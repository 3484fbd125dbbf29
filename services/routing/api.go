package routing

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/routing/bird"
	"routerd.dev/services/routing/conf"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
)

// Endpoints are the service's operations.
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.BGPGet, s.get),
		bus.Bind(api.BGPSetOp, func(ctx context.Context, r *api.BGPSet) (*api.BGPChange, error) {
			return s.change(ctx, "set", func(v *conf.Settings) (string, error) { return v.Set(r) })
		}),
		bus.Bind(api.BGPPeerAddOp, func(ctx context.Context, r *api.BGPPeerAdd) (*api.BGPChange, error) {
			return s.change(ctx, "peer-add", func(v *conf.Settings) (string, error) { return v.PeerAdd(r, s.seal) })
		}),
		bus.Bind(api.BGPPeerDelOp, func(ctx context.Context, r *api.BGPPeerRef) (*api.BGPChange, error) {
			return s.change(ctx, "peer-del", func(v *conf.Settings) (string, error) { return v.PeerDel(r.Name) })
		}),
		bus.Bind(api.BGPPeerEnOp, func(ctx context.Context, r *api.BGPPeerRef) (*api.BGPChange, error) {
			return s.change(ctx, "peer-enable", func(v *conf.Settings) (string, error) { return v.PeerEnable(r.Name, true) })
		}),
		bus.Bind(api.BGPPeerDisOp, func(ctx context.Context, r *api.BGPPeerRef) (*api.BGPChange, error) {
			return s.change(ctx, "peer-disable", func(v *conf.Settings) (string, error) { return v.PeerEnable(r.Name, false) })
		}),
		bus.Bind(api.BGPAnnAddOp, func(ctx context.Context, r *api.BGPPrefix) (*api.BGPChange, error) {
			return s.change(ctx, "announce-add", func(v *conf.Settings) (string, error) { return v.AnnounceAdd(r.Prefix) })
		}),
		bus.Bind(api.BGPAnnDelOp, func(ctx context.Context, r *api.BGPPrefix) (*api.BGPChange, error) {
			return s.change(ctx, "announce-del", func(v *conf.Settings) (string, error) { return v.AnnounceDel(r.Prefix) })
		}),
		bus.Bind(api.BGPBhAddOp, func(ctx context.Context, r *api.BGPAddress) (*api.BGPChange, error) {
			return s.change(ctx, "blackhole-add", func(v *conf.Settings) (string, error) { return v.BlackholeAdd(r.IP) })
		}),
		bus.Bind(api.BGPBhDelOp, func(ctx context.Context, r *api.BGPAddress) (*api.BGPChange, error) {
			return s.change(ctx, "blackhole-del", func(v *conf.Settings) (string, error) { return v.BlackholeDel(r.IP) })
		}),
		bus.Bind(api.OSPFSetOp, func(ctx context.Context, r *api.OSPFSet) (*api.BGPChange, error) {
			return s.change(ctx, "ospf-set", func(v *conf.Settings) (string, error) { return v.OSPFSet(r) })
		}),
		bus.Bind(api.OSPFIfAddOp, func(ctx context.Context, r *api.OSPFIfaceAdd) (*api.BGPChange, error) {
			return s.change(ctx, "ospf-iface-add", func(v *conf.Settings) (string, error) { return v.OSPFIfaceAdd(r) })
		}),
		bus.Bind(api.OSPFIfDelOp, func(ctx context.Context, r *api.OSPFIfaceRef) (*api.BGPChange, error) {
			return s.change(ctx, "ospf-iface-del", func(v *conf.Settings) (string, error) { return v.OSPFIfaceDel(r.Name) })
		}),
		bus.Bind(api.RoutingConfig.Export, s.Export),
		bus.Bind(api.RoutingConfig.Import, s.Import),
		bus.Bind(api.BGPConfirmOp, s.confirm),
		bus.Bind(api.BGPUndoOp, s.undo),
		bus.Bind(api.BGPUnknownOp, func(_ context.Context, r *api.BGPOpRef) (*api.BGPChange, error) {
			return nil, apierr.NotFound("unknown operation %q: use set, peer-add, peer-del, peer-enable, peer-disable, announce-add, announce-del, blackhole-add, blackhole-del, ospf-set, ospf-iface-add, ospf-iface-del, confirm, undo", r.Op)
		}),
	}
}

func untimed(op string) bool { return op == "blackhole-add" || op == "blackhole-del" }

// change is every POST /bgp/{op} but confirm and undo: the operation is
// applied to a copy of the settings, which must have no problems and pass
// `bird -p`; then stored (with the previous settings and the deadline when
// it waits for confirm) and loaded. A failed load puts everything back.
func (s *Service) change(ctx context.Context, op string, fn func(*conf.Settings) (string, error)) (*api.BGPChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fst == nil {
		return nil, apierr.Unavailable("the routing service is not serving")
	}
	if _, err := s.daemon.Installed(); err != nil {
		return nil, apierr.Conflict("%v", err)
	}
	cur, rev, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	p, _, err := s.loadPending(ctx)
	if err != nil {
		return nil, err
	}
	if p != nil && !untimed(op) {
		left := time.Until(time.UnixMilli(p.DeadlineMS)).Seconds()
		return nil, apierr.Conflict("a change (%s by %s) is waiting for confirm, %.0f s left: confirm or undo it first", p.What, p.By, max(left, 0)).
			With("pending", s.pendingView(p))
	}
	next := cur.Clone()
	msg, err := fn(&next)
	if err != nil {
		var ie *conf.InputError
		var nf *conf.NotFoundError
		switch {
		case errors.As(err, &ie):
			return nil, apierr.Invalid(ie.Field, "%s", ie.Message)
		case errors.As(err, &nf):
			return nil, apierr.NotFound("%s", nf.Message)
		}
		return nil, err
	}
	if probs := next.Problems(); len(probs) > 0 {
		return nil, apierr.BadRequest("the settings would have problems: %s", strings.Join(probs, "; ")).With("problems", probs)
	}
	text, err := s.render(next)
	if err != nil {
		return nil, err
	}
	if err := s.daemon.Check(text); err != nil {
		return nil, apierr.BadRequest("%v", err)
	}

	timed := !untimed(op) && (cur.Active() || next.Active())
	out := &api.BGPChange{Result: api.Result{Message: msg}, Op: op, Event: api.EventBGPChanged}
	txn := s.fst.Txn().IfRevision(s.settingsKey(), rev).Put(s.settingsKey(), next)
	var deadline time.Time
	if timed {
		deadline = s.deps.Now().Add(s.deps.Confirm)
		txn.IfAbsent(s.pendingKey()).Put(s.pendingKey(), Pending{
			Previous: cur, DeadlineMS: deadline.UnixMilli(), What: op, By: api.OriginOf(ctx).String()})
	}
	if _, err := txn.Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	if err := s.apply(ctx, next); err == nil {
		s.refused.Store(nil)
	} else {
		// Put the previous settings back, in etcd and in the daemon.
		back := s.fst.Txn().Put(s.settingsKey(), cur)
		if timed {
			back.Delete(s.pendingKey())
		}
		_, berr := back.Commit(context.WithoutCancel(ctx))
		rerr := s.apply(ctx, cur)
		s.deps.Log.Error("routing change not loaded; previous settings restored", "op", op, "err", err, "restore_store", berr, "restore_daemon", rerr)
		return nil, apierr.Internal(err.Error(), "BIRD did not load the change; the previous settings are back")
	}
	if timed {
		s.armLocked(deadline.Sub(s.deps.Now()))
		d := deadline.Unix()
		out.Pending, out.Deadline = true, &d
		out.Message += fmt.Sprintf("; confirm within %s (POST /bgp/confirm) or it is undone", s.deps.Confirm.Round(time.Second))
	}
	return out, nil
}

func (s *Service) confirm(ctx context.Context, _ *api.None) (*api.BGPChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fst == nil {
		return nil, apierr.Unavailable("the routing service is not serving")
	}
	p, rev, err := s.loadPending(ctx)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, apierr.Conflict("no change is waiting for confirm")
	}
	if _, err := s.fst.Txn().IfRevision(s.pendingKey(), rev).Delete(s.pendingKey()).Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	return &api.BGPChange{Result: api.Result{Message: "Change kept: " + p.What}, Op: "confirm", Event: api.EventBGPConfirmed}, nil
}

func (s *Service) undo(ctx context.Context, _ *api.None) (*api.BGPChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fst == nil {
		return nil, apierr.Unavailable("the routing service is not serving")
	}
	p, _, err := s.loadPending(ctx)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, apierr.Conflict("no change is waiting for confirm")
	}
	if err := s.undoLocked(ctx, "undo asked by "+api.OriginOf(ctx).String(), false, true); err != nil {
		var ae *apierr.Error
		if errors.As(err, &ae) {
			return nil, ae
		}
		return nil, apierr.Internal(err.Error(), "previous settings restored but BIRD did not load them")
	}
	return &api.BGPChange{Result: api.Result{Message: "Change undone: " + p.What}, Op: "undo", Event: api.EventBGPUndone}, nil
}

func (s *Service) pendingView(p *Pending) *api.BGPPending {
	if p == nil {
		return nil
	}
	left := time.UnixMilli(p.DeadlineMS).Sub(s.deps.Now())
	return &api.BGPPending{Deadline: time.UnixMilli(p.DeadlineMS).Unix(), LeftS: int64(max(left, 0).Round(time.Second) / time.Second), What: p.What, By: p.By}
}

// get is GET /bgp: the settings and the daemon's live state.
func (s *Service) get(ctx context.Context, q *api.BGPQuery) (*api.BGPView, error) {
	cur, _, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	if q.Config {
		text, err := conf.Render(cur, conf.Options{Log: "", RTR: s.deps.RTR, Mask: true})
		if err != nil {
			return nil, err
		}
		return &api.BGPView{Config: &text, File: s.daemon.Conf()}, nil
	}
	p, _, err := s.loadPending(ctx)
	if err != nil {
		return nil, err
	}
	v := &api.BGPView{OK: true, Enabled: cur.Enabled, ASN: cur.ASN, RouterID: cur.RouterID,
		Announce: nonNil(cur.Announce), Blackhole: nonNil(cur.Blackhole), Peers: []api.BGPPeer{},
		Problems: nonNil(cur.Problems()), KernelMetric: cur.KernelMetric, Pending: s.pendingView(p),
		Settings: api.BGPSettingsDoc{Enabled: cur.Enabled, ASN: cur.ASN, RouterID: cur.RouterID, RPKI: cur.RPKI,
			Announce: nonNil(cur.Announce), Blackhole: nonNil(cur.Blackhole), KernelMetric: cur.KernelMetric},
		OSPF: api.OSPFView{Enabled: cur.OSPF.Enabled, Area: cur.OSPF.Area, OriginateDefault: cur.OSPF.OriginateDefault,
			AcceptDefault: cur.OSPF.AcceptDefault, Interfaces: []api.OSPFIface{}, Neighbors: []api.OSPFNeighbor{}, Protocols: []api.RoutingProtocol{}},
		RPKI: api.RPKIView{Enabled: cur.RPKI},
	}
	live := s.live(ctx)
	v.Installed = live.installed
	if r := s.refused.Load(); live.err == nil && r != nil {
		live.err = *r
	}
	if live.err != nil {
		e := live.err.Error()
		v.BirdError = &e
	}
	for _, pe := range cur.Peers {
		out := api.BGPPeer{Name: pe.Name, IP: pe.IP, ASN: pe.ASN, Type: pe.Type, Routes: pe.Routes, Role: pe.Role,
			Enabled: pe.Enabled, Description: pe.Description, PasswordSet: pe.Password != "",
			BlackholeCommunity: pe.BlackholeCommunity, MaxPrefix: conf.EffectiveMaxPrefix(&pe), Multihop: pe.Multihop, BFD: pe.BFD}
		if pr, ok := live.protos[conf.ProtoName(pe.Name)]; ok && cur.Enabled {
			st := pr.BGPState
			if st == "" {
				st = pr.State // disabled: "down"
				if pr.State == "down" {
					st = "Idle"
				}
			}
			out.State = &st
			out.Up = pr.BGPState == "Established"
			out.Since = strp(pr.Since)
			out.Info = strp(pr.Info)
			out.LastError = strp(pr.LastError)
			out.Received, out.Sent, out.Filtered, out.Best = pr.Imported+pr.Filtered, pr.Exported, pr.Filtered, pr.Preferred
		}
		if pe.BFD {
			if a, err := netip.ParseAddr(pe.IP); err == nil {
				if st, ok := live.bfd[a.String()]; ok {
					out.BFDState = &st
				}
			}
		}
		v.Peers = append(v.Peers, out)
	}
	// neighbors_full counts routers: one Full over OSPFv2 and OSPFv3 is
	// one neighbour.
	full := map[string]int{}
	seenFull := map[[2]string]bool{}
	for _, n := range live.neighbors {
		v.OSPF.Neighbors = append(v.OSPF.Neighbors, api.OSPFNeighbor(n))
		if k := [2]string{n.Iface, n.RouterID}; strings.HasPrefix(n.State, "Full") && !seenFull[k] {
			seenFull[k] = true
			full[n.Iface]++
		}
	}
	for _, i := range cur.OSPF.Interfaces {
		v.OSPF.Interfaces = append(v.OSPF.Interfaces, api.OSPFIface{Name: i.Name, Cost: i.Cost, Passive: i.Passive, NeighborsFull: full[i.Name]})
	}
	for _, pr := range live.protos {
		if pr.Proto == "OSPF" {
			v.OSPF.Protocols = append(v.OSPF.Protocols, api.RoutingProtocol{Name: pr.Name, State: pr.State, Info: pr.Info, Since: pr.Since})
		}
	}
	if r, ok := live.protos[conf.ProtoRPKI]; ok {
		// data: the cache session's state; age_s: since the last update
		// from the cache; stale: no data, the session down, or no update
		// for two refresh periods.
		data := r.Status
		if data == "" {
			data = r.State
		}
		v.RPKI.Status.Data = &data
		v.RPKI.Status.VRPs = r.Imported
		if r.LastUpdateS >= 0 {
			age := int64(r.LastUpdateS)
			v.RPKI.Status.AgeS = &age
		}
		v.RPKI.Status.Stale = r.State != "up" || r.LastUpdateS < 0 || r.LastUpdateS > 2*conf.RPKIRefresh.Seconds()
	}
	return v, nil
}

type liveState struct {
	installed bool
	err       error
	protos    map[string]bird.Protocol
	bfd       map[string]string
	neighbors []bird.Neighbor
}

// live asks the daemon for its protocols, BFD sessions and OSPF
// neighbours.
func (s *Service) live(ctx context.Context) liveState {
	ls := liveState{protos: map[string]bird.Protocol{}, bfd: map[string]string{}}
	if _, err := s.daemon.Installed(); err != nil {
		ls.err = err
		return ls
	}
	ls.installed = true
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	lines, err := bird.Cmd(cctx, s.daemon.Socket(), "show protocols all")
	if err != nil {
		ls.err = fmt.Errorf("cannot ask BIRD: %w", err)
		return ls
	}
	for _, p := range bird.ParseProtocols(lines) {
		ls.protos[p.Name] = p
	}
	if _, ok := ls.protos[conf.ProtoBFD]; ok {
		if lines, err := bird.Cmd(cctx, s.daemon.Socket(), "show bfd sessions"); err == nil {
			ls.bfd = bird.ParseBFD(lines)
		}
	}
	for _, name := range []string{conf.ProtoOSPF, conf.ProtoOSPF6} {
		if _, ok := ls.protos[name]; !ok {
			continue
		}
		if lines, err := bird.Cmd(cctx, s.daemon.Socket(), "show ospf neighbors "+name); err == nil {
			for _, n := range bird.ParseOSPFNeighbors(lines) {
				if n.Proto == "" {
					n.Proto = name
				}
				ls.neighbors = append(ls.neighbors, n)
			}
		}
	}
	return ls
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}
