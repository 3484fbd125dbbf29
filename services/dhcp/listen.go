package dhcp

import (
	"context"
	"errors"
	"net"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/ra"
)

// reconcileListeners opens a listener for every served interface that has
// none and closes those of interfaces no longer served; listeners of
// interfaces that stay served are left alone.
func (e *Engine) reconcileListeners(ctx context.Context) {
	cfg := e.Config()
	want := map[string]string{}
	for _, n := range cfg.Networks {
		want["4|"+n.Iface] = n.Iface
	}
	for _, n := range cfg.Networks6 {
		want["6|"+n.Iface] = n.Iface
		want["ra|"+n.Iface] = n.Iface
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, l := range e.listeners {
		if _, ok := want[k]; !ok {
			l.stop()
			delete(e.listeners, k)
			e.log.Info("stopped serving", "listener", k)
		}
	}
	for k, iface := range want {
		if _, ok := e.listeners[k]; ok {
			continue
		}
		lctx, stop := context.WithCancel(ctx)
		l := &listener{key: k, iface: iface, stop: stop}
		var err error
		switch k[:2] {
		case "4|":
			if l.conn, err = listenUDP(e.d.NetNS, "udp4", iface, dhcpv4.ServerPort); err == nil {
				e.goServe(lctx, l, e.serve4)
			}
		case "6|":
			if l.conn, err = listenUDP(e.d.NetNS, "udp6", iface, 547); err == nil {
				e.goServe(lctx, l, e.serve6)
			}
		default:
			if l.ra, err = ra.New(e.d.NetNS, iface, e.raConfig(cfg, iface), e.log); err == nil {
				e.wg.Add(1)
				go func() { defer e.wg.Done(); l.ra.Run(lctx) }()
			}
		}
		if err != nil {
			stop()
			e.log.Warn("cannot serve interface yet", "listener", k, "err", err)
			continue
		}
		e.listeners[k] = l
		e.log.Info("serving", "listener", k)
	}
}

func (e *Engine) goServe(ctx context.Context, l *listener, fn func(*listener)) {
	e.wg.Add(2)
	go func() { defer e.wg.Done(); fn(l) }()
	go func() { defer e.wg.Done(); <-ctx.Done(); l.conn.Close() }()
}

func (e *Engine) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, l := range e.listeners {
		l.stop()
		delete(e.listeners, k)
	}
}

// serve4 is the receive loop of one interface's DHCPv4 socket.
func (e *Engine) serve4(l *listener) {
	buf := make([]byte, 4096)
	for {
		n, _, err := l.conn.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		req, err := dhcpv4.FromBytes(buf[:n])
		if err != nil {
			continue
		}
		rep := e.v4.Handle(l.iface, req)
		if rep == nil {
			continue
		}
		e.commitThen(rep.Ops, func() {
			if rep.Resp != nil {
				if _, err := l.conn.WriteToUDP(rep.Resp, rep.Dst); err != nil {
					e.log.Debug("send DHCPv4 answer", "dst", rep.Dst, "err", err)
				}
			}
			e.publish(rep.Events)
		})
	}
}

// serve6 is the receive loop of one interface's DHCPv6 socket.
func (e *Engine) serve6(l *listener) {
	buf := make([]byte, 65536)
	for {
		n, peer, err := l.conn.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		rep := e.v6.Handle(l.iface, peer, buf[:n])
		if rep == nil {
			continue
		}
		e.commitThen(rep.Ops, func() {
			for _, p := range rep.RouteDel {
				if err := e.routes.Del(p); err != nil {
					e.log.Warn("withdraw delegated route", "prefix", p, "err", err)
				}
			}
			for _, w := range rep.RouteAdd {
				if err := e.routes.Add(w); err != nil {
					e.log.Warn("install delegated route", "route", w.String(), "err", err)
				}
			}
			if _, err := l.conn.WriteToUDP(rep.Resp, rep.Dst); err != nil {
				e.log.Debug("send DHCPv6 answer", "dst", rep.Dst, "err", err)
			}
			e.publish(rep.Events)
		})
	}
}

// raConfig is what the advertiser of one interface announces: M when the
// interface has DHCPv6 addresses, O for resolvers and domain.
func (e *Engine) raConfig(cfg config.Config, iface string) ra.Config {
	rc := ra.Config{Interval: cfg.RA.Interval, RouterLifetime: cfg.RA.RouterLifetime, SLAAC: cfg.RA.SLAAC,
		Valid: cfg.Lifetimes6.Valid, Preferred: cfg.Lifetimes6.Preferred, Domain: cfg.DNS.Domain}
	for _, n := range cfg.Networks6 {
		if n.Iface != iface {
			continue
		}
		rc.Prefix = n.Prefix
		rc.Managed = true
		rc.DNS = cfg.DNS.V6
		if o, ok := cfg.DNS.PerIface[iface]; ok && len(o.V6) > 0 {
			rc.DNS = o.V6
		}
	}
	rc.Other = len(rc.DNS) > 0 || rc.Domain != ""
	return rc
}
