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

// notYet is the step the dhcp service offers no operation for yet.
const notYet = "the dhcp service does not offer this over the bus yet"

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
		out.Net6 = step(errString(notYet), retryText("POST /net6", map[string]string{"iface": name}))
		out.PD = step(errString(notYet), retryText("POST /pd", map[string]string{"iface": name}))
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

type errString string

func (e errString) Error() string { return string(e) }
