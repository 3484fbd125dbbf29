package netcfg

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
)

// dhcpServer runs a new VLAN's serving steps by asking the dhcp service,
// the owner of served networks, over the bus.
type dhcpServer struct{ nc *nats.Conn }

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
