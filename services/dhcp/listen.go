package dhcp

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/ra"
	"routerd.dev/services/dhcp/v4"
)

// reconcileListeners opens a listener for every served interface that has
// none and closes those of interfaces no longer served or suspended;
// listeners of interfaces that stay served are left alone. A closed
// advertiser sends a last advertisement with router lifetime 0, as radvd
// does when an interface stops advertising, so hosts drop the router at
// once.
func (e *Engine) reconcileListeners(ctx context.Context) {
	cfg := e.Config()
	want := map[string]string{}
	for _, n := range cfg.Networks {
		if _, off := cfg.Suspended[n.Iface]; !off {
			want["4|"+n.Iface] = n.Iface
		}
	}
	for _, n := range cfg.Networks6 {
		if _, off := cfg.Suspended[n.Iface]; !off {
			want["6|"+n.Iface] = n.Iface
			want["ra|"+n.Iface] = n.Iface
		}
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
			if l.sock, err = listenUDP(e.d.NetNS, false, iface, dhcpv4.ServerPort); err == nil {
				e.goServe(lctx, l, e.serve4)
			}
		case "6|":
			if l.sock, err = listenUDP(e.d.NetNS, true, iface, 547); err == nil {
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
	l.log = e.log
	l.paced = make(chan outMsg, 1<<14)
	l.bucket = newBucket(paceRate, paceBurst)
	e.wg.Add(3)
	go func() { defer e.wg.Done(); l.pace(ctx) }()
	go func() { defer e.wg.Done(); defer l.sock.release(); fn(l) }()
	go func() { defer e.wg.Done(); <-ctx.Done(); l.sock.close() }()
}

func (e *Engine) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, l := range e.listeners {
		l.stop()
		delete(e.listeners, k)
	}
}

const (
	// pollStop bounds how long a stopped listener's receive loop takes to
	// notice (the socket's receive timeout).
	pollStop = 100 * time.Millisecond
	// maxQueueAge sheds requests that waited longer than this in the
	// socket queue: under overload (a PON port's CPEs all asking at once)
	// an answer that late reaches a client that has given up on it or
	// already retransmitted, so answering it only delays the answers that
	// can still be used. Clients retransmit after about 4 s (DHCPv4) or
	// 1 s (DHCPv6 SOLICIT); a relay waits less.
	maxQueueAge = time.Second
	// A listener's answers leave at up to paceRate a second (20,000
	// four-message exchanges), in bursts of at most paceBurst, a sender
	// sleeping at least paceGap at a time (see bucket).
	paceRate = 40000
	// A group commit of fewer than commitGatherBelow leases waits up to
	// commitGather for more (see lease.Committer): an answer is that much
	// later, and a lone lease no longer pays a commit's fixed cost alone.
	commitGather      = 2 * time.Millisecond
	commitGatherBelow = 32
	paceBurst         = 64
	paceGap           = 200 * time.Microsecond
)

// receive reads datagrams in batches and hands each to fn with its payload
// and source; fn may queue answers on out, which go out with one sendmmsg
// when the batch is done.
func (l *listener) receive(bufSize int, fn func(b []byte, src netip.AddrPort, out *outBatch)) {
	in := newRing(batch, bufSize)
	out := &outBatch{r: newRing(batch, 0), s: l.sock}
	for !l.sock.closed.Load() {
		n, err := l.sock.recv(in)
		if err != nil {
			continue // EAGAIN (the poll timeout), EINTR
		}
		l.received.Add(uint64(n))
		stale := time.Now().Add(-maxQueueAge)
		for i := 0; i < n; i++ {
			if t := in.received(i); !t.IsZero() && t.Before(stale) {
				l.shed.Add(1)
				continue
			}
			fn(in.payload(i), in.source(i), out)
		}
		out.flush(l)
	}
}

// outBatch collects the answers of one receive batch.
type outBatch struct {
	r *ring
	s *udpSock
	n int
}

func (o *outBatch) add(l *listener, b []byte, dst netip.AddrPort) {
	if o.n == len(o.r.h) {
		o.flush(l)
	}
	o.r.prepare(o.n, b, o.s.setDest(o.r, o.n, dst))
	o.n++
}

func (o *outBatch) flush(l *listener) {
	for off := 0; off < o.n; off += paceBurst {
		k := min(paceBurst, o.n-off)
		l.bucket.take(k)
		if err := o.s.sendAll(o.r, off, off+k); err != nil {
			l.log.Debug("send answers", "iface", l.iface, "err", err)
		}
	}
	clear(o.r.buf[:o.n]) // drop references to the answers
	o.n = 0
}

// pace sends the answers released by group commits, through the
// listener's bucket like every other answer.
func (l *listener) pace(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-l.paced:
			l.bucket.take(1)
			l.send(m.b, m.dst)
		}
	}
}

// queue hands a committed answer to the pacer.
func (l *listener) queue(b []byte, dst netip.AddrPort) {
	select {
	case l.paced <- outMsg{b, dst}:
	default:
		l.send(b, dst) // pacer saturated: send at once rather than drop
	}
}

func (l *listener) send(b []byte, dst netip.AddrPort) {
	if err := l.sock.sendTo(b, dst); err != nil {
		l.log.Debug("send answer", "iface", l.iface, "dst", dst, "err", err)
	}
}

// serve4 is the receive loop of one interface's DHCPv4 socket. Each slot
// of a receive batch has its own Reply, whose buffers are reused batch
// after batch: an answer from memory allocates almost nothing. A Reply that
// waits for a group commit is handed over whole and its slot given a new one.
func (e *Engine) serve4(l *listener) {
	reps := make([]*v4.Reply, batch)
	for i := range reps {
		reps[i] = new(v4.Reply)
	}
	slot := 0
	l.receive(4096, func(b []byte, _ netip.AddrPort, out *outBatch) {
		if out.n == 0 {
			slot = 0
		}
		rep := reps[slot]
		if !e.v4.HandleInto(l.iface, b, rep) {
			return
		}
		if len(rep.Ops) == 0 {
			if len(rep.Resp) > 0 {
				out.add(l, rep.Resp, rep.Dst)
				slot++
			}
			e.publish(rep.Events)
			return
		}
		reps[slot] = new(v4.Reply)
		e.commitThen(rep.Ops, func() {
			if len(rep.Resp) > 0 {
				l.queue(rep.Resp, rep.Dst)
			}
			e.publish(rep.Events)
		})
	})
}

// serve6 is the receive loop of one interface's DHCPv6 socket.
func (e *Engine) serve6(l *listener) {
	l.receive(16384, func(b []byte, src netip.AddrPort, out *outBatch) {
		peer := &net.UDPAddr{IP: src.Addr().AsSlice(), Port: int(src.Port())}
		if src.Addr().Is6() && src.Addr().IsLinkLocalUnicast() {
			peer.Zone = l.iface
		}
		rep := e.v6.Handle(l.iface, peer, b)
		if rep == nil {
			return
		}
		dst := rep.Dst.AddrPort()
		if len(rep.Ops) == 0 && len(rep.RouteAdd) == 0 && len(rep.RouteDel) == 0 {
			out.add(l, rep.Resp, dst)
			e.publish(rep.Events)
			return
		}
		e.commitThen(rep.Ops, func() {
			// The answer goes first: the leases are durable; the routes
			// follow on the route writer's goroutine, and the reconciler
			// (SyncRoutes, and every start) stands behind one that fails.
			l.queue(rep.Resp, dst)
			e.changeRoutes(rep.RouteDel, rep.RouteAdd)
			e.publish(rep.Events)
		})
	})
}

// raConfig is what the advertiser of one interface announces: M when the
// interface has DHCPv6 addresses, O for resolvers and domain.
func (e *Engine) raConfig(cfg config.Config, iface string) ra.Config {
	rc := ra.Config{Interval: cfg.RA.Interval, RouterLifetime: cfg.RA.RouterLifetime, SLAAC: cfg.RA.SLAAC, MTU: cfg.RA.MTU,
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
