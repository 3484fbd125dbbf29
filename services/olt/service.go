// Package olt is the service that drives the router's OLTs (Document 3):
// POST /olt/{op} runs one operation of the driver's registry on one OLT,
// GET /olt lists them, and /olts is the registry of OLTs known by name,
// their credentials sealed on the router. The driver (driver, huawei) and
// the simulator (sim) are the packages below.
package olt

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei"
	"routerd.dev/services/olt/huawei/parse"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/seal"
	"routerd.dev/shared/store"
)

// Name is the service's name on the bus and its etcd prefix.
const Name = "olt"

const (
	timeLayout    = "2006-01-02 15:04:05"
	defaultVendor = "huawei"
	unsavedNote   = "not saved to the OLT's flash yet: run op save when done"
)

// Deps are what the service is built on.
type Deps struct {
	NC  *nats.Conn
	KV  *clientv3.Client
	Log *slog.Logger
	// StateDir holds the sealing key of registered OLTs' credentials
	// (KeyFile); it must be set.
	StateDir string
	Now      func() time.Time
	// BackupEvery is the period of the automatic configuration backup of
	// every registered OLT; 0 is DefaultBackupEvery, negative none.
	BackupEvery time.Duration
	// BackupKeep is how many revisions each OLT keeps; 0 is
	// DefaultBackupKeep.
	BackupKeep int
	// PollEvery is the period of the poller that reads each registered
	// OLT for the monitor's events; 0 is DefaultPollEvery, negative none.
	PollEvery time.Duration
	// StallTimeout gives an OLT session up when nothing arrives for this
	// long while a reply is awaited (a hung OLT, a link silently gone),
	// instead of waiting for the operation's whole timeout; 0 is
	// DefaultStallTimeout. save is bounded by its timeout only.
	StallTimeout time.Duration
	// RxMinDBm and RxMaxDBm are the optical thresholds of the poller's
	// ont.optical events for OLTs whose record sets none; 0 is MinRxDBm /
	// MaxRxDBm.
	RxMinDBm, RxMaxDBm float64
}

// DefaultStallTimeout is the service's stall timeout: well under the
// operations' default timeout (40 s), well over the longest silence of a
// working OLT outside save.
const DefaultStallTimeout = 20 * time.Second

// DefaultBackupEvery is the period of the automatic backups: daily.
const DefaultBackupEvery = 24 * time.Hour

// Service is the olt service.
type Service struct {
	deps    Deps
	log     *slog.Logger
	st      *store.Store
	seal    *sealer
	drivers *huawei.Drivers
	pub     *bus.Publisher
	now     func() time.Time
	sync    syncer
	// bg runs background work (plan sync) bound to bgCtx, Run's life.
	bg    sync.WaitGroup
	bgCtx context.Context
}

// New builds the service.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.StateDir == "" {
		d.StateDir = filepath.Join(os.TempDir(), "routerd-olt")
	}
	if d.StallTimeout == 0 {
		d.StallTimeout = DefaultStallTimeout
	}
	s := &Service{
		deps: d, log: d.Log, now: d.Now, bgCtx: context.Background(),
		st:   store.New(d.KV, Name),
		seal: &sealer{key: seal.New(filepath.Join(d.StateDir, KeyFile))},
		pub:  bus.NewPublisher(d.NC, Name, d.Log),
	}
	s.drivers = huawei.NewDrivers(huawei.Deps{Logger: d.Log, SSHSeen: s.sshSeen, Alarm: s.alarm, StallTimeout: d.StallTimeout})
	return s
}

// Run serves until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	s.bgCtx = ctx
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait(); s.bg.Wait(); s.drivers.Close() }()
	if s.deps.BackupEvery >= 0 {
		wg.Go(func() { s.periodicBackups(ctx) })
	}
	if s.deps.PollEvery >= 0 {
		wg.Go(func() { s.poll(ctx) })
	}
	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "OLT operations and the OLT registry",
		Log:       s.log,
		Endpoints: s.Endpoints(),
	})
}

// Endpoints are the service's operations.
func (s *Service) Endpoints() []bus.Endpoint {
	eps := []bus.Endpoint{
		bus.Bind(api.OLTUsageGet, s.Usage),
		bus.Bind(api.OLTUnknownOp, s.Unknown),
		bus.Bind(api.OLTsList, s.List),
		bus.Bind(api.OLTRegistryConfig.Export, s.Export),
		bus.Bind(api.OLTRegistryConfig.Import, s.Import),
		noSecretsInURL(bus.Bind(api.OLTsAdd, s.Add)),
		noSecretsInURL(bus.Bind(api.OLTsSet, s.Set)),
		bus.Bind(api.OLTsDelete, s.Delete),
		bindCoded(api.OLTBackupOp, s.Backup),
		bus.Bind(api.OLTBackupsList, s.Backups),
		bus.Bind(api.OLTDiffOp, s.Diff),
		bindCoded(api.OLTSyncOp, s.Sync),
		bus.Bind(api.OLTSyncStart, s.SyncStart),
	}
	return append(eps, s.opEndpoints()...)
}

// Usage is GET /olt: no OLT is contacted.
func (s *Service) Usage(ctx context.Context, _ *api.None) (*api.OLTUsage, error) {
	return &api.OLTUsage{
		Ops: driver.Ops(), WriteOps: driver.WriteOps(),
		Usage: "POST /olt/{op} with a JSON body: olt (a registered OLT's name) or host, user, pass " +
			"[protocol telnet|ssh, port, vendor] (or the X-OLT-Name, X-OLT-Host, X-OLT-User, X-OLT-Pass, " +
			"X-OLT-Protocol, X-OLT-Port, X-OLT-Vendor headers; never in the URL), timeout 10-300 s, raw, " +
			"dry_run, force, and the operation's arguments. Action form: /api?action=olt-<op>&olt=<name>&<arguments>.",
	}, nil
}

// Unknown answers POST /olt/{op} for an op that is not one of ops.
func (s *Service) Unknown(ctx context.Context, r *api.OLTOpName) (*api.None, error) {
	return nil, apierr.NotFound("Unknown OLT operation: %s", r.Op).With("ops", driver.Ops())
}

// headerFields maps the X-OLT-* headers onto the request fields they stand
// for; a field sent in the body wins.
var headerFields = map[string]string{
	"X-Olt-Name": "olt", "X-Olt-Host": "host", "X-Olt-User": "user", "X-Olt-Pass": "pass",
	"X-Olt-Password": "pass", "X-Olt-Protocol": "protocol", "X-Olt-Port": "port", "X-Olt-Vendor": "vendor",
}

// urlSecrets are the arguments that must never come from a URL.
var urlSecrets = []string{"host", "user", "pass", "password"}

// credentialsInURL refuses OLT credentials in the query string, of a
// REST call or of the action form (a POSTed action's JSON body may carry
// them: the gateway keeps the URL's query apart in the envelope).
func credentialsInURL(req *pb.Request) error {
	return secretsInURL(req, urlSecrets)
}

func secretsInURL(req *pb.Request, names []string) error {
	for _, k := range names {
		if req.Query.Has(k) {
			return apierr.Invalid(k, "OLT credentials never go in a URL: send %s in the JSON body of POST /olt/{op} or in the X-OLT-* headers, or name a registered OLT with olt", k)
		}
	}
	return nil
}

// opCall runs one operation on a driver with the request decoded.
type opCall[Req any] func(ctx context.Context, d driver.Driver, r *Req, o driver.Options) (any, error)

// bindOp makes the endpoint of one OLT operation: decode (with the
// headers' OLT choice), choose the OLT, run, answer the envelope.
func bindOp[Req any, P interface {
	*Req
	Options() *api.OLTOptions
}](s *Service, op api.Op[Req, api.OLTAnswer], fn opCall[Req]) bus.Endpoint {
	m := op.Describe()
	name := strings.TrimPrefix(m.Name, "op.")
	return bus.Endpoint{Subject: m.Subject(), Concurrency: m.ConcurrencyOrDefault(),
		Handler: func(ctx context.Context, req *pb.Request) (int, any, error) {
			if err := credentialsInURL(req); err != nil {
				return 0, nil, err
			}
			args := bus.Arguments(req)
			for h, f := range headerFields {
				if v, ok := req.Headers[h]; ok && v != "" {
					if _, sent := args[f]; !sent {
						args[f] = quote(v)
					}
				}
			}
			var in Req
			if err := op.Decode(args, &in); err != nil {
				return 0, nil, err
			}
			return s.run(ctx, req, name, P(&in).Options(), func(ctx context.Context, d driver.Driver, o driver.Options) (any, error) {
				return fn(ctx, d, &in, o)
			})
		}}
}

func quote(s string) []byte {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return []byte(b.String())
}

// target is the OLT a call runs on.
type target struct {
	cfg  huawei.Config
	ref  api.OLTTarget
	rec  *stored
	lock string // etcd lock name of the OLT's writes
}

// choose applies Document 3's order: olt (or X-OLT-Name), one-off host,
// user and pass, the only registered OLT; otherwise 400.
func (s *Service) choose(ctx context.Context, o *api.OLTOptions) (*target, error) {
	if o.OLT != "" {
		rec, c, err := s.lookup(ctx, o.OLT)
		if err != nil {
			return nil, err
		}
		return registered(rec, c), nil
	}
	if o.Host != "" || o.User != "" || o.Pass != "" {
		for _, f := range []struct{ name, v string }{{"host", o.Host}, {"user", o.User}, {"pass", o.Pass}} {
			if f.v == "" {
				return nil, apierr.Invalid(f.name, "%s is required with one-off credentials: send host, user and pass together, or name a registered OLT with olt", f.name)
			}
		}
		port, _ := o.TCPPort()
		cfg := huawei.Config{Host: o.Host, Port: port, Protocol: o.Protocol, User: o.User, Pass: o.Pass}
		return &target{cfg: cfg, ref: api.OLTTarget{Host: o.Host}, lock: "olt/" + o.Host}, nil
	}
	recs, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	if len(recs) == 1 {
		rec, c, err := s.lookup(ctx, recs[0].Name)
		if err != nil {
			return nil, err
		}
		return registered(rec, c), nil
	}
	return nil, apierr.Invalid("olt", "no OLT chosen (%d registered): name a registered OLT with olt (or X-OLT-Name) or send host, user and pass on this call", len(recs))
}

func registered(rec *stored, c credentials) *target {
	cfg := huawei.Config{Host: rec.Host, Port: rec.Port, Protocol: rec.Protocol, User: c.User, Pass: c.Pass,
		SVLAN: rec.SVLAN, Operator: rec.Operator, IPTVVLAN: rec.IPTVVLAN, Prefix: rec.Prefix, HostKey: rec.SSHHostKey}
	return &target{cfg: cfg, ref: api.OLTTarget{Host: rec.Host, Name: rec.Name}, rec: rec, lock: "olt/" + rec.Host}
}

// run chooses the OLT, takes the per-OLT write lock for a write, calls
// the driver under the operation's timeout and answers the envelope.
func (s *Service) run(ctx context.Context, req *pb.Request, name string, o *api.OLTOptions,
	call func(context.Context, driver.Driver, driver.Options) (any, error)) (int, any, error) {
	info, _ := driver.Lookup(name)
	if o.DryRun && info.Write && !info.DryRun {
		return 0, nil, apierr.Invalid("dry_run", "%s has no dry run", name)
	}
	t, err := s.choose(ctx, o)
	if err != nil {
		return 0, nil, err
	}
	timeout := driver.EffectiveTimeout(name, time.Duration(o.Timeout)*time.Second)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	logArgs := []any{"op", name, "olt", t.ref.Name, "host", t.ref.Host, "request_id", req.RequestID,
		"caller", req.Caller, "by", req.By}
	if info.Write && !o.DryRun {
		if err := s.licensed(); err != nil {
			s.log.Warn("olt operation refused", append(logArgs, "outcome", "unlicensed")...)
			return 0, nil, err
		}
		// Writes run one at a time per OLT across every replica: the
		// driver serialises within this process, the etcd lock across.
		lock, err := store.Acquire(ctx, s.deps.KV, t.lock)
		if err != nil {
			s.log.Warn("olt operation refused", append(logArgs, "outcome", "write lock not acquired", "err", err)...)
			return 0, nil, apierr.Unavailable("another write to OLT %s did not finish within the timeout; try again", t.ref.Host)
		}
		defer lock.Unlock(context.WithoutCancel(ctx))
	}
	d, err := s.drivers.Get(t.cfg)
	if err != nil {
		return 0, nil, apierr.BadRequest("%v", err)
	}
	tr := &driver.Transcript{}
	res, err := call(driver.WithTranscript(ctx, tr), d, driver.Options{Timeout: timeout, DryRun: o.DryRun, Force: o.Force})
	var ae *apierr.Error
	if errors.As(err, &ae) {
		s.log.Info("olt operation refused", append(logArgs, "outcome", ae.Status(), "error", ae.Message)...)
		return 0, nil, ae
	}
	var arg *driver.ArgError
	if errors.As(err, &arg) {
		s.log.Info("olt operation refused", append(logArgs, "outcome", 400, "error", arg.Reason)...)
		return 0, nil, apierr.BadRequest("%s", arg.Reason)
	}
	ans := &api.OLTAnswer{Op: name, OLT: t.ref, TookMS: time.Since(start).Milliseconds(), Code: driver.Code(err)}
	if err == nil {
		ans.OK, ans.Result = true, res
		if info.Write && name != "save" && !o.DryRun {
			ans.Note = unsavedNote
		}
		if o.Raw {
			ans.Raw = tr
		}
	} else {
		msg := err.Error()
		ans.Error = &msg
		var de *driver.Error
		if errors.As(err, &de) && len(de.Transcript) > 0 {
			ans.Raw = &driver.Transcript{Exchanges: de.Transcript}
		} else {
			ans.Raw = tr
		}
	}
	outcome := append(logArgs, "outcome", ans.Code, "took_ms", ans.TookMS)
	if err != nil {
		s.log.Warn("olt operation failed", append(outcome, "error", *ans.Error)...)
	} else {
		s.log.Info("olt operation", outcome...)
	}
	if err == nil && info.Write && !o.DryRun {
		s.pub.Publish(api.EventOLTOp, req, map[string]any{"op": name, "olt": t.ref, "result": res})
		if kind, ok := ontEvents[name]; ok {
			s.pub.Publish(kind, req, ontEvent(t.ref, res))
		}
	}
	if ans.Code == http.StatusOK {
		return http.StatusOK, ans, nil
	}
	return ans.Code, ans, nil
}

// ontEvents are the monitor's ONT events published after the write that
// causes them.
var ontEvents = map[string]string{
	"ont-add": "ont.added", "ont-del": "ont.deleted",
	"ont-activate": "ont.activated", "ont-deactivate": "ont.deactivated",
}

// ontEvent is an ONT event's data: the OLT and the ONT's port, id and
// serial as the result names them.
func ontEvent(ref api.OLTTarget, res any) map[string]any {
	out := map[string]any{"olt": ref.Name, "host": ref.Host}
	switch r := res.(type) {
	case *driver.ONTAddResult:
		out["port"], out["ont_id"], out["sn"] = r.Port, r.ONTID, r.SN
	case *driver.ONTDelResult:
		out["port"], out["ont_id"] = r.Port, r.ONTID
	case *driver.ONTActiveResult:
		out["port"], out["ont_id"], out["active"] = r.Port, r.ONTID, r.Active
	}
	return out
}

// EventOLTAlarm carries an asynchronous alarm the OLT printed (in an
// output, at the prompt or while a command was typed): {olt, host, alarm
// (the block's text, broken lines joined), name, kind, severity, time,
// parameters, and port and ont_id when the alarm names them}.
const EventOLTAlarm = "olt.alarm"

// alarm publishes an alarm block the driver took out of a result.
func (s *Service) alarm(host, text string) {
	names := []string{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if recs, err := s.all(ctx); err == nil {
		for _, r := range recs {
			if r.Host == host {
				names = append(names, r.Name)
			}
		}
	}
	name := strings.Join(names, ",")
	s.log.Info("olt alarm", "olt", name, "host", host, "alarm", text)
	ev := map[string]any{"olt": name, "host": host, "alarm": text}
	a := parse.ParseAlarm(text)
	for k, v := range map[string]string{"name": a.Name, "kind": a.Kind, "severity": a.Severity, "time": a.Time} {
		if v != "" {
			ev[k] = v
		}
	}
	if len(a.Parameters) > 0 {
		ev["parameters"] = a.Parameters
		p := a.Parameters
		if f, sl, pt := p["FrameID"], p["SlotID"], p["PortID"]; f != "" && sl != "" && pt != "" {
			ev["port"] = f + "/" + sl + "/" + pt
		}
		if id, err := strconv.Atoi(p["ONT ID"]); err == nil {
			ev["ont_id"] = id
		}
	}
	s.pub.Publish(EventOLTAlarm, nil, ev)
}

// noSecretsInURL refuses a registry change whose user or password came in
// the URL (query string or a GET action form): send them in the JSON body
// of POST /olts, or POST the action with a JSON body.
func noSecretsInURL(ep bus.Endpoint) bus.Endpoint {
	inner := ep.Handler
	ep.Handler = func(ctx context.Context, req *pb.Request) (int, any, error) {
		if err := secretsInURL(req, []string{"user", "pass", "password"}); err != nil {
			return 0, nil, err
		}
		return inner(ctx, req)
	}
	return ep
}
