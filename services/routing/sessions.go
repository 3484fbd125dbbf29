package routing

import (
	"context"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/routing/bird"
	"routerd.dev/services/routing/conf"
)

// sessionPoll is how often the sessions are read for up/down events.
const sessionPoll = 2 * time.Second

// watchSessions publishes bgp.session each time a peer's session goes up
// or down, read from the daemon every sessionPoll.
func (s *Service) watchSessions(ctx context.Context) {
	up := map[string]bool{}
	t := time.NewTicker(sessionPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, _, err := s.load(ctx)
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		lines, err := bird.Cmd(cctx, s.daemon.Socket(), "show protocols all")
		cancel()
		if err != nil {
			continue
		}
		protos := map[string]bird.Protocol{}
		for _, p := range bird.ParseProtocols(lines) {
			protos[p.Name] = p
		}
		for _, p := range cur.Peers {
			pr := protos[conf.ProtoName(p.Name)]
			now := pr.BGPState == "Established"
			if was, seen := up[p.Name]; (seen && was != now) || (!seen && now) {
				s.pub.Publish(api.EventBGPSession, nil, map[string]any{"peer": p.Name, "state": pr.BGPState, "up": now, "last_error": pr.LastError})
				s.deps.Log.Info("BGP session changed", "peer", p.Name, "state", pr.BGPState, "up", now)
			}
			up[p.Name] = now
		}
	}
}
