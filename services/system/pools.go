package system

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
)

// Pool fill thresholds of the doctor.
const (
	poolWarn     = 0.90
	poolCritical = 1.00
)

// servedNetwork is the part of the dhcp engine's configuration in force
// the doctor reads (api.DHCPState.InForce).
type servedNetwork struct {
	Iface     string `json:"iface"`
	Network   string `json:"network"`
	Gateway   string `json:"gateway"`
	PoolStart string `json:"pool_start"`
	PoolEnd   string `json:"pool_end"`
}

// poolSize is how many addresses a network's dynamic pool holds: its
// range, or every host address but the gateway when it has none.
func poolSize(n servedNetwork) int {
	if s, err := netip.ParseAddr(n.PoolStart); err == nil {
		if e, err := netip.ParseAddr(n.PoolEnd); err == nil && s.Is4() && e.Is4() {
			a, b := s.As4(), e.As4()
			d := int(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) -
				int(uint32(a[0])<<24|uint32(a[1])<<16|uint32(a[2])<<8|uint32(a[3]))
			return max(d+1, 0)
		}
	}
	p, err := netip.ParsePrefix(n.Network)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return 0
	}
	return 1<<(32-p.Bits()) - 3 // network, broadcast, gateway
}

// poolFinding judges one pool's fill.
func poolFinding(n servedNetwork, used, size int) *api.Finding {
	if size <= 0 {
		return nil
	}
	frac := float64(used) / float64(size)
	f := &api.Finding{Area: "dhcp-pool", Detail: fmt.Sprintf("%s on %s: %d of %d addresses leased (%.0f%%)", n.Network, n.Iface, used, size, 100*frac),
		Fix: "widen the pool or the network (POST /net), shorten the lease time, or move subscribers to another network"}
	switch {
	case frac >= poolCritical:
		f.Severity, f.Problem = "critical", "the DHCP pool of "+n.Iface+" is exhausted"
	case frac >= poolWarn:
		f.Severity, f.Problem = "warning", "the DHCP pool of "+n.Iface+" is nearly exhausted"
	default:
		return nil
	}
	return f
}

// checkServed: each served network's pool fill (dhcp-pool), and each
// served interface still present with its address and listened on
// (interface).
func (s *Service) checkServed(ctx context.Context, inForce any) []api.Finding {
	var cfg struct {
		Networks []servedNetwork `json:"networks"`
	}
	raw, _ := json.Marshal(inForce)
	if json.Unmarshal(raw, &cfg) != nil || len(cfg.Networks) == 0 {
		return nil
	}
	var out []api.Finding
	ifs, err := bus.Invoke(ctx, s.deps.NC, api.InterfacesList, &api.None{})
	if err == nil {
		have := map[string]api.DHCPInterface{}
		for _, i := range ifs.Interfaces {
			have[i.Iface] = i
		}
		for _, n := range cfg.Networks {
			i, ok := have[n.Iface]
			switch {
			case !ok || i.Gateway == "":
				out = append(out, api.Finding{Severity: "critical", Area: "interface",
					Problem: "served interface " + n.Iface + " is down or has lost its address",
					Detail:  n.Network + " is served on " + n.Iface + ", which has no IPv4 address in the router namespace now",
					Fix:     "bring " + n.Iface + " up with its gateway address " + n.Gateway + " (ip link, GET /interfaces), or remove the network (DELETE /net)"})
			case !i.DHCPActive:
				out = append(out, api.Finding{Severity: "warning", Area: "interface",
					Problem: "DHCP does not listen on served interface " + n.Iface,
					Detail:  fmt.Sprintf("in configuration %v, in listen list %v", i.InDHCPConf, i.InDHCPListen),
					Fix:     "POST /dhcp/reload; see routerd's log for dhcp"})
			}
		}
	}
	for _, n := range cfg.Networks {
		l, err := bus.Invoke(ctx, s.deps.NC, api.LeasesList, &api.LeaseFilter{Iface: n.Iface, Kind: "v4", Limit: 1})
		if err != nil {
			continue
		}
		if f := poolFinding(n, l.Total, poolSize(n)); f != nil {
			out = append(out, *f)
		}
	}
	return out
}
