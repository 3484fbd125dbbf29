package dhcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp/config"
)

// Serving suspended on one interface (serving.set): netcfg's VLAN disable
// takes DHCPv4, DHCPv6 and router advertisements offline there and its
// enable brings them back (Document 2's VLAN state table). The suspension
// is part of the served-network document (config.Suspended), so it
// survives a restart and travels in backups, and everything else the
// interface is served with stays configured: subnets, pools, the
// delegation slice, resolvers, leases. The engine stops answering for
// those networks at once (relayed requests included) and closes the
// interface's listeners; its advertiser leaves with a router lifetime of 0.

// errUnchanged ends a serving change that has nothing to do: nothing is
// stored.
var errUnchanged = errors.New("unchanged")

// offered names what a configuration serves on iface, in the state
// table's words.
func offered(c config.Config, iface string) []string {
	out := []string{}
	for _, n := range c.Networks {
		if n.Iface == iface {
			out = append(out, "DHCPv4")
		}
	}
	for _, n := range c.Networks6 {
		if n.Iface == iface {
			out = append(out, "DHCPv6", "router advertisements")
		}
	}
	return out
}

func wireSuspension(s config.Suspension) *api.ServingSuspension {
	return &api.ServingSuspension{Since: s.Since.Local().Format(time.DateTime), Reason: s.Reason}
}

func (s *Service) setServing(ctx context.Context, in *api.ServingSet) (*api.ServingAnswer, error) {
	out := &api.ServingAnswer{Iface: in.Iface, Enabled: in.Enabled, TookOffline: []string{}, Restored: []string{}}
	err := s.changeConfig(ctx, func(c *config.Config) error {
		what := offered(*c, in.Iface)
		cur, off := c.Suspended[in.Iface]
		switch {
		case len(what) == 0:
			out.Message = in.Iface + " is not served: nothing to " + map[bool]string{false: "suspend", true: "resume"}[in.Enabled]
			return errUnchanged
		case !in.Enabled && off:
			out.Suspended = wireSuspension(cur)
			out.Message = fmt.Sprintf("serving on %s is already suspended (since %s)", in.Iface, out.Suspended.Since)
			return errUnchanged
		case in.Enabled && !off:
			out.Message = "serving on " + in.Iface + " is not suspended"
			return errUnchanged
		case !in.Enabled:
			sus := config.Suspension{Since: s.d.Now().UTC().Truncate(time.Second), Reason: in.Reason}
			if c.Suspended == nil {
				c.Suspended = map[string]config.Suspension{}
			}
			c.Suspended[in.Iface] = sus
			out.TookOffline, out.Suspended = what, wireSuspension(sus)
			out.Message = "serving on " + in.Iface + " suspended"
		default:
			delete(c.Suspended, in.Iface)
			out.Restored, out.Suspended = what, wireSuspension(cur)
			out.Message = "serving on " + in.Iface + " resumed"
		}
		return nil
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return nil, err
	}
	return out, nil
}
