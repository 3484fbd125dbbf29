// Package huawei drives Huawei SmartAX GPON OLTs (MA5600T/MA5608T/MA5683T,
// MA5800, EA5800) over their command line, telnet or SSH, and implements
// driver.Driver.
//
// One Driver is one OLT. Sessions are pooled and reused; each logs in,
// enters `enable` and `config`, and answers the paging, parameter and y/n
// prompts itself. Writes hold a per-OLT lock so they run one at a time,
// reads run alongside on their own sessions. A command that was sent is
// never sent again: a write that fails mid-way is reported with the
// transcript, not retried; only a failed dial may fall back to the other
// transport, because nothing was sent yet.
package huawei

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"routerd.dev/services/olt/driver"
)

// Config is one OLT's connection and the router's place on it.
type Config struct {
	// Host is the OLT's address, e.g. "10.0.0.2".
	Host string
	// Port is the OLT's TCP port; default 23 for telnet, 22 for ssh.
	Port int
	// Protocol is "telnet" (default) or "ssh".
	Protocol string
	// Fallback is the transport tried when the first cannot be dialled,
	// e.g. "ssh"; empty means none. FallbackPort is its TCP port.
	Fallback     string
	FallbackPort int
	// User and Pass log in.
	User, Pass string
	// SVLAN is this router's S-VLAN on a shared OLT, e.g. 3000; 0 for none.
	SVLAN int
	// Operator marks another company's OLT: every guard applies.
	Operator bool
	// IPTVVLAN is the OLT's IPTV VLAN used by ont-add with iptv=true.
	IPTVVLAN int
	// Prefix names the objects the router creates; default "router", or
	// "s<svlan>" when SVLAN is set.
	Prefix string
	// Headroom multiplies plan rates on the OLT; default 1.10.
	Headroom float64
	// MaxIdle is how many logged-in sessions are kept for reuse; default 2.
	MaxIdle int
	// IdleTimeout drops pooled sessions unused for longer, before the OLT's
	// own idle logout (5 minutes by default on SmartAX); default 4 minutes.
	IdleTimeout time.Duration
	// HostKey is the SSH host key the OLT must present, in authorized_keys
	// form ("ssh-ed25519 AAAA..."); empty accepts the key presented and
	// reports it to Deps.SSHSeen (trust on first use).
	HostKey string
	// StallTimeout gives a session up when the OLT sends nothing for this
	// long while a reply is awaited; default DefaultStallTimeout.
	StallTimeout time.Duration
}

// Deps are the Driver's collaborators.
type Deps struct {
	Logger *slog.Logger
	// SSHSeen, when set, is told after each SSH handshake what the OLT
	// presented (its host key) and which legacy algorithms were needed.
	SSHSeen func(SSHSeen)
	// Alarm, when set, receives each asynchronous alarm block the OLT
	// printed during an operation (taken out of the result).
	Alarm func(host, alarm string)
	// StallTimeout is the stall timeout of every Config that sets none;
	// zero is DefaultStallTimeout.
	StallTimeout time.Duration
}

// Driver is a Huawei SmartAX OLT.
type Driver struct {
	cfg      Config
	log      *slog.Logger
	writeSem chan struct{}
	seen     func(SSHSeen)
	alarm    func(host, alarm string)

	mu    sync.Mutex // guards idle and cache
	idle  []*session
	cache map[string]int // object known to exist -> its index
}

var _ driver.Driver = (*Driver)(nil)

// New validates cfg and returns a Driver; it does not connect yet.
func New(cfg Config, deps Deps) (*Driver, error) {
	if cfg.Host == "" || cfg.User == "" {
		return nil, errors.New("huawei: host and user are required")
	}
	if cfg.Protocol == "" {
		cfg.Protocol = "telnet"
	}
	if cfg.Protocol != "telnet" && cfg.Protocol != "ssh" {
		return nil, fmt.Errorf("huawei: unknown protocol %q", cfg.Protocol)
	}
	defPort := func(p string) int {
		if p == "ssh" {
			return 22
		}
		return 23
	}
	if cfg.Port == 0 {
		cfg.Port = defPort(cfg.Protocol)
	}
	if cfg.Fallback != "" && cfg.FallbackPort == 0 {
		cfg.FallbackPort = defPort(cfg.Fallback)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "router"
		if cfg.SVLAN != 0 {
			cfg.Prefix = fmt.Sprintf("s%d", cfg.SVLAN)
		}
	}
	if cfg.Headroom == 0 {
		cfg.Headroom = 1.10
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = 2
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 4 * time.Minute
	}
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = deps.StallTimeout
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, log: log.With("olt", cfg.Host), writeSem: make(chan struct{}, 1), cache: map[string]int{}, seen: deps.SSHSeen, alarm: deps.Alarm}, nil
}

// Close logs out of the idle sessions.
func (d *Driver) Close() error {
	d.mu.Lock()
	idle := d.idle
	d.idle = nil
	d.mu.Unlock()
	for _, s := range idle {
		s.close()
	}
	return nil
}

func (d *Driver) shared() bool { return d.cfg.SVLAN != 0 || d.cfg.Operator }

func (d *Driver) get(ctx context.Context) (*session, error) {
	for {
		d.mu.Lock()
		n := len(d.idle)
		if n == 0 {
			d.mu.Unlock()
			break
		}
		s := d.idle[n-1]
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		// A pooled session the OLT closed meanwhile (idle logout, reboot)
		// is found out before anything is sent on it.
		if time.Since(s.lastUsed) < d.cfg.IdleTimeout && s.alive() {
			return s, nil
		}
		s.close()
	}
	s, err := dial(ctx, dialer{host: d.cfg.Host, port: d.cfg.Port, user: d.cfg.User, pass: d.cfg.Pass, protocol: d.cfg.Protocol, hostKey: d.cfg.HostKey, seen: d.seen, stall: d.cfg.StallTimeout})
	var le *driver.LoginError
	if err != nil && !errors.As(err, &le) && d.cfg.Fallback != "" && ctx.Err() == nil {
		// Nothing was sent on the first transport, so trying the other is safe.
		d.log.Warn("dial failed, trying fallback transport", "protocol", d.cfg.Protocol, "fallback", d.cfg.Fallback, "err", err)
		s, err = dial(ctx, dialer{host: d.cfg.Host, port: d.cfg.FallbackPort, user: d.cfg.User, pass: d.cfg.Pass, protocol: d.cfg.Fallback, hostKey: d.cfg.HostKey, seen: d.seen, stall: d.cfg.StallTimeout})
	}
	return s, err
}

func (d *Driver) put(s *session) {
	if s.broken || s.mode() != "config" {
		s.close()
		return
	}
	s.ex, s.alarms = nil, nil
	s.lastUsed = time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.idle) >= d.cfg.MaxIdle {
		s.close()
		return
	}
	d.idle = append(d.idle, s)
}

// call is one operation in progress: its session, whether it only plans,
// and the changing commands it sent or planned.
type call struct {
	d    *Driver
	s    *session
	dry  bool
	cmds []string
	out  []string
}

// read sends a command that changes nothing; it runs even under dry_run.
func (c *call) read(ctx context.Context, cmd string) (string, error) {
	return c.s.exec(ctx, cmd)
}

// write sends a changing command, or only records it under dry_run.
func (c *call) write(ctx context.Context, cmd string) (string, error) {
	c.cmds = append(c.cmds, cmd)
	if c.dry {
		return "", nil
	}
	out, err := c.s.exec(ctx, cmd)
	if t := strings.TrimSpace(out); t != "" && err == nil {
		c.out = append(c.out, t)
	}
	return out, err
}

func (c *call) result() driver.WriteResult {
	cmds := c.cmds
	if cmds == nil {
		cmds = []string{}
	}
	return driver.WriteResult{DryRun: c.dry, Commands: cmds, Output: strings.Join(c.out, "\n")}
}

// do runs fn as operation op: timeout, the write lock, a pooled session,
// the transcript, and the error wrapping the API expects.
func (d *Driver) do(ctx context.Context, op string, o driver.Options, fn func(context.Context, *call) error) error {
	info, ok := driver.Lookup(op)
	if !ok {
		return fmt.Errorf("unknown operation %q", op)
	}
	if o.DryRun && info.Write && !info.DryRun {
		return &driver.Error{Op: op, Err: &driver.ArgError{Reason: op + " cannot be planned: dry_run is not supported"}}
	}
	ctx, cancel := context.WithTimeout(ctx, driver.EffectiveTimeout(op, o.Timeout))
	defer cancel()
	if info.Write {
		select {
		case d.writeSem <- struct{}{}:
			defer func() { <-d.writeSem }()
		case <-ctx.Done():
			return &driver.Error{Op: op, Err: fmt.Errorf("%w waiting for another write to finish", driver.ErrTimeout)}
		}
	}
	s, err := d.get(ctx)
	if err != nil {
		var le *driver.LoginError
		var ex []driver.Exchange
		var de *dialError
		if errors.As(err, &de) {
			err, ex = de.err, de.ex
		}
		if !errors.As(err, &le) && ctx.Err() != nil {
			err = fmt.Errorf("%w: %v", driver.ErrTimeout, err)
		}
		if t := driver.TranscriptFrom(ctx); t != nil {
			t.Exchanges = append(t.Exchanges, ex...)
		}
		return &driver.Error{Op: op, Err: err, Transcript: ex}
	}
	// save may print nothing for minutes while the OLT writes its flash:
	// it is bounded by its timeout only.
	s.stall = d.cfg.StallTimeout
	if op == "save" {
		s.stall = driver.EffectiveTimeout(op, o.Timeout)
	}
	c := &call{d: d, s: s, dry: o.DryRun && info.DryRun}
	err = fn(ctx, c)
	if len(s.alarms) > 0 {
		d.log.Info("olt alarms during operation", "op", op, "alarms", len(s.alarms))
		if d.alarm != nil {
			for _, a := range s.alarms {
				d.alarm(d.cfg.Host, a)
			}
		}
	}
	if err != nil {
		var ce *driver.CommandError
		if errors.As(err, &ce) || errors.Is(err, driver.ErrTimeout) {
			// After an error the mode is uncertain and a timed-out command
			// may still be running: do not reuse the session.
			s.broken = s.broken || !errors.As(err, &ce)
		}
		if errors.As(err, &ce) {
			d.resetCache()
		}
	}
	// A session left in a sub-mode is returned to config mode before reuse.
	if !s.broken && s.mode() != "config" && ctx.Err() == nil {
		for i := 0; i < 3 && strings.HasPrefix(s.mode(), "config-"); i++ {
			if _, qerr := s.exec(ctx, "quit"); qerr != nil {
				break
			}
		}
	}
	ex := s.ex
	if t := driver.TranscriptFrom(ctx); t != nil {
		t.Exchanges = append(t.Exchanges, ex...)
	}
	d.put(s)
	if err != nil {
		return &driver.Error{Op: op, Err: err, Transcript: ex}
	}
	return nil
}

func (d *Driver) resetCache() {
	d.mu.Lock()
	d.cache = map[string]int{}
	d.mu.Unlock()
}

func (d *Driver) cached(key string) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.cache[key]
	return v, ok
}

func (d *Driver) remember(key string, v int) {
	d.mu.Lock()
	d.cache[key] = v
	d.mu.Unlock()
}
