package gateway

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
)

// authFailSlots bounds the reports of failed authentications in flight
// (api.FirewallAuthFailed, the ban engine's feed): a report that finds no
// slot is dropped, so a flood of wrong keys never piles up goroutines, and
// the request never waits for the firewall service.
var authFailSlots = make(chan struct{}, 64)

// authFailTimeout bounds one report.
const authFailTimeout = 2 * time.Second

// reportAuthFailure tells the firewall service, in the background, that
// caller failed to authenticate on the port r came to. The key is never
// sent: only the address, the port and the time.
func (g *Gateway) reportAuthFailure(caller string, r *http.Request) {
	port := 0
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(la.String()); err == nil {
			port, _ = strconv.Atoi(p)
		}
	}
	in := &api.AuthFailure{Addr: caller, Port: port, Time: time.Now().UTC().Format(time.RFC3339)}
	select {
	case authFailSlots <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-authFailSlots }()
		ctx, cancel := context.WithTimeout(context.Background(), authFailTimeout)
		defer cancel()
		// Best effort and silent: the auth log has the line already, and a
		// report may outlive the request (and a test's logger).
		_, _ = bus.Invoke(ctx, g.cfg.NC, api.FirewallAuthFailed, in)
	}()
}
