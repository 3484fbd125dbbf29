package netcfg

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
)

// users asks the owners of what may depend on a VLAN or an address: the
// subscribers service (registered clients, their gateways) and cgnat
// (translation through the interface). An owner that is not running
// refuses nothing (said in a log line); one that fails otherwise refuses,
// since nothing could be checked.
type users struct {
	nc  *nats.Conn
	log *slog.Logger
}

// askTimeout bounds each question to another service.
const askTimeout = 5 * time.Second

func (u users) failed(what, name string, err error) []string {
	if ae := apierr.From(err); ae.Kind == apierr.KindUnavailable && strings.Contains(ae.Message, "not running") {
		u.log.Info("owner not running: taken as nothing depending on it", "check", what, "iface", name, "err", err)
		return nil
	}
	return []string{fmt.Sprintf("%s on %s could not be checked: %v", what, name, err)}
}

// clients lists the registered clients of an interface (at most limit).
func (u users) clients(ctx context.Context, iface string, limit int) ([]api.Client, error) {
	var out []api.Client
	after := ""
	for len(out) < limit {
		cctx, cancel := context.WithTimeout(ctx, askTimeout)
		page, err := bus.Invoke(cctx, u.nc, api.ClientsPage, &api.ClientPageRequest{Iface: iface, After: after, Limit: min(limit, 5000)})
		cancel()
		if err != nil {
			return out, err
		}
		for _, c := range page.Clients {
			if c.Iface == iface {
				out = append(out, c)
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	return out, nil
}

// VLANInUse refuses a disable or delete while clients are registered on
// the VLAN or CGNAT translates through it.
func (u users) VLANInUse(ctx context.Context, name string, deleting bool) []string {
	var why []string
	cs, err := u.clients(ctx, name, 3)
	switch {
	case err != nil:
		why = append(why, u.failed("registered clients", name, err)...)
	case len(cs) > 0:
		macs := make([]string, len(cs))
		for i, c := range cs {
			macs[i] = c.MAC + " " + c.IP
		}
		why = append(why, fmt.Sprintf("clients are registered on %s (%s%s): move or delete them first", name, strings.Join(macs, ", "),
			map[bool]string{true: ", ...", false: ""}[len(cs) == 3]))
	}
	cctx, cancel := context.WithTimeout(ctx, askTimeout)
	nat, err := bus.Invoke(cctx, u.nc, api.CGNATUses, &api.NATIface{Iface: name})
	cancel()
	switch {
	case err != nil:
		why = append(why, u.failed("CGNAT", name, err)...)
	case nat.CGNAT:
		s := "CGNAT translates through " + name
		if nat.Fix != "" {
			s += ": " + nat.Fix
		}
		why = append(why, s)
	}
	return why
}

// AddrInUse refuses removing an address that is a registered client's
// gateway.
func (u users) AddrInUse(ctx context.Context, iface string, addr netip.Addr) []string {
	cs, err := u.clients(ctx, iface, 100000)
	if err != nil {
		return u.failed("registered clients' gateways", iface, err)
	}
	n := 0
	for _, c := range cs {
		if g, err := netip.ParseAddr(c.Gateway); err == nil && g.Unmap() == addr {
			n++
		}
	}
	if n > 0 {
		return []string{fmt.Sprintf("%s is the gateway of %d registered client(s) on %s", addr, n, iface)}
	}
	return nil
}

// Forwards are cgnat's port forwards through an interface (none when
// cgnat does not answer).
func (u users) Forwards(ctx context.Context, name string) []string {
	cctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	nat, err := bus.Invoke(cctx, u.nc, api.CGNATUses, &api.NATIface{Iface: name})
	if err != nil {
		return nil
	}
	return nat.Forwards
}
