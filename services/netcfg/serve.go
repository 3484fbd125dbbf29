package netcfg

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/services/netcfg/route"
	"routerd.dev/services/netcfg/vlan"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
)

// dhcpServer runs a new VLAN's serving steps by asking the dhcp service,
// the owner of served networks, over the bus; for a deleted VLAN it also
// removes netcfg's own routes through it.
type dhcpServer struct {
	nc     *nats.Conn
	routes *route.Table
}

func (d dhcpServer) Serve(ctx context.Context, name, label string, v4, v6 bool) (*api.Served, string) {
	out := &api.Served{}
	failed := false
	step := func(err error, retry string) map[string]any {
		failed = true
		return map[string]any{"error": err.Error(), "retry": retry}
	}
	if v4 {
		a, err := bus.Invoke(ctx, d.nc, api.NetAdd, &api.NetIface{Iface: name, Label: label})
		if err != nil {
			out.Net = step(err, retryText("POST /net", map[string]string{"iface": name}))
		} else {
			out.Net = map[string]any{"network": a.Network.Network}
		}
	}
	if v6 {
		// DHCPv6 with its pool (POST /net6 derives one), then a slice of
		// the delegation pool (POST /pd): each reported on its own.
		if a, err := bus.Invoke(ctx, d.nc, api.Net6Add, &api.Net6Iface{Iface: name}); err != nil {
			out.Net6 = step(err, retryText("POST /net6", map[string]string{"iface": name}))
		} else {
			n := map[string]any{"network": a.Network6.Network, "pool": a.Pool}
			out.Net6 = n
		}
		if a, err := bus.Invoke(ctx, d.nc, api.PDAdd, &api.PDSet{Iface: name}); err != nil {
			out.PD = step(err, retryText("POST /pd", map[string]string{"iface": name}))
		} else {
			out.PD = map[string]any{"pool": a.Pool, "capacity": a.Capacity}
		}
	}
	if failed {
		return out, "VLAN " + name + " is not fully served: see served for the steps to retry"
	}
	return out, ""
}

func retryText(form string, body map[string]string) string {
	raw, _ := json.Marshal(body)
	return form + " " + string(raw)
}

// Unserve asks dhcp to stop serving name (DHCPv4, DHCPv6, its delegation
// slice) and removes the managed routes through it. A step with nothing to
// remove (404) is not an error.
func (d dhcpServer) Unserve(ctx context.Context, name string) vlan.Unserved {
	var u vlan.Unserved
	failed := func(step string, err error) {
		if apierr.From(err).Kind != apierr.KindNotFound {
			u.Errors = append(u.Errors, step+": "+err.Error())
		}
	}
	if a, err := bus.Invoke(ctx, d.nc, api.NetDelete, &api.NetIface{Iface: name}); err != nil {
		failed("DELETE /net", err)
	} else if a.Network.Network != "" {
		u.Subnets = append(u.Subnets, a.Network.Network)
	}
	if a, err := bus.Invoke(ctx, d.nc, api.Net6Delete, &api.Net6Iface{Iface: name}); err != nil {
		failed("DELETE /net6", err)
	} else if a.RemovedPDPool != nil {
		u.PDPool = a.RemovedPDPool
	}
	if _, err := bus.Invoke(ctx, d.nc, api.PDDelete, &api.PDIface{Iface: name}); err != nil {
		failed("DELETE /pd", err)
	}
	// Its NAT pool and port forwards, from cgnat (not running: none).
	if a, err := bus.Invoke(ctx, d.nc, api.CGNATIfaceRemove, &api.NATIface{Iface: name}); err != nil {
		if ae := apierr.From(err); ae.Kind != apierr.KindNotFound && !(ae.Kind == apierr.KindUnavailable && strings.Contains(ae.Message, "not running")) {
			u.Errors = append(u.Errors, "NAT: "+err.Error())
		}
	} else {
		if a.RemovedNAT {
			u.NAT = true
		}
		u.Forwards = a.RemovedForwards
	}
	if d.routes != nil {
		managed, err := d.routes.Managed(ctx)
		if err != nil {
			u.Errors = append(u.Errors, "routes: "+err.Error())
		}
		for _, r := range managed {
			if r.Dev != name {
				continue
			}
			if _, _, err := d.routes.Delete(ctx, r.Prefix, r.Via, r.Dev); err != nil {
				u.Errors = append(u.Errors, "route "+r.Prefix+": "+err.Error())
				continue
			}
			u.Routes = append(u.Routes, r.Prefix)
		}
	}
	return u
}

// Unused names the DHCP subnet (and the delegation range) of a removed
// address when no address of that subnet is left on the interface.
func (d dhcpServer) Unused(ctx context.Context, iface string, removed netip.Prefix, left []netip.Prefix, a *api.AddrAnswer) {
	for _, p := range left {
		if p.Masked() == removed.Masked() {
			return // the subnet still has an address here
		}
	}
	nets, err := bus.Invoke(ctx, d.nc, api.NetworksList, &api.None{})
	if err != nil {
		return
	}
	for _, n := range nets.Networks {
		if n.Iface != iface {
			continue
		}
		if removed.Addr().Is4() && n.Network == removed.Masked().String() {
			a.UnusedSubnet = map[string]any{"kind": "dhcp4", "block": n.Network, "file": "/router/dhcp/config"}
			a.Warning = "the DHCP subnet " + n.Network + " on " + iface + " has no address left: remove it with DELETE /net"
		}
		if removed.Addr().Is6() && n.IPv6 == removed.Masked().String() {
			a.UnusedSubnet = map[string]any{"kind": "dhcp6", "block": n.IPv6, "file": "/router/dhcp/config"}
			a.Warning = "the DHCPv6 subnet " + n.IPv6 + " on " + iface + " has no address left: remove it with DELETE /net6"
			if pd, err := bus.Invoke(ctx, d.nc, api.PDGet, &api.None{}); err == nil {
				if r, ok := pd.PerVLAN[iface]; ok {
					a.UnusedPDPool = r
					a.PDWarning = "the delegation range of " + iface + " is left unused: remove it with DELETE /pd"
				}
			}
		}
	}
}

// Suspend asks dhcp to stop serving a VLAN being disabled (serving.set):
// what went offline, in the state table's words.
func (d dhcpServer) Suspend(ctx context.Context, name, reason string) ([]string, error) {
	return d.serving(ctx, &api.ServingSet{Iface: name, Reason: reason}, func(a *api.ServingAnswer) []string { return a.TookOffline })
}

// Resume asks dhcp to serve an enabled VLAN again: what came back.
func (d dhcpServer) Resume(ctx context.Context, name string) ([]string, error) {
	return d.serving(ctx, &api.ServingSet{Iface: name, Enabled: true}, func(a *api.ServingAnswer) []string { return a.Restored })
}

func (d dhcpServer) serving(ctx context.Context, in *api.ServingSet, what func(*api.ServingAnswer) []string) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	a, err := bus.Invoke(cctx, d.nc, api.ServingSetOp, in)
	if err != nil {
		// Not running, standing by, or not answering in time.
		if apierr.From(err).Kind == apierr.KindUnavailable {
			return nil, fmt.Errorf("%w: %v", vlan.ErrNoDHCP, err)
		}
		return nil, err
	}
	return nonNil(what(a)), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
