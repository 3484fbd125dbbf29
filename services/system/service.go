// Package system is the service behind GET /status (and later doctor,
// alerts, saved configuration versions, backup and restore). It owns no
// kernel state: it gathers what the other services report over the bus, so
// every number it shows comes from the service that owns it.
package system

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto"
	"routerd.dev/proto/api"
	"routerd.dev/services/system/versions"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
	"routerd.dev/shared/version"
)

// Name is the service's name on the bus.
const Name = "system"

// askTimeout bounds each question to another service, so one slow service
// delays GET /status by at most this much.
const askTimeout = 2 * time.Second

// Deps are what the service is built on.
type Deps struct {
	NC *nats.Conn
	// KV is the system service's store (saved configuration versions
	// under /router/system/); without it only GET /status is served.
	KV  *clientv3.Client
	Log *slog.Logger
	Now func() time.Time
	// Owners are the services whose configuration documents make up the
	// running configuration; nil is api.ConfigOwners.
	Owners []api.ConfigOwner
	// StateDir is the router's state directory (the doctor checks its
	// free space; restore reads archives from anywhere on the router).
	StateDir string
	// Expect are the services the doctor expects on the bus; nil is every
	// service of shared/config.Services but the gateway.
	Expect []string
	// SampleEvery is the health sampling and alarm interval; 0 is
	// DefaultSampleEvery.
	SampleEvery time.Duration
}

// Service is the system service.
type Service struct {
	deps Deps
	// gather coalesces the questions of concurrent GET /status: a request
	// arriving while the other services are being asked shares that round
	// of answers (at most a few milliseconds old) instead of asking again,
	// so a burst of status polls costs the other services one question
	// each, not one per poll.
	gather singleflight.Group

	owners   []api.ConfigOwner
	versions *versions.Store
	st       *store.Store // the system service's own keys (nil without KV)
}

// New builds the service.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &Service{deps: d, owners: d.Owners}
	if s.owners == nil {
		s.owners = api.ConfigOwners
	}
	if d.KV != nil {
		s.st = store.New(d.KV, Name)
		s.versions = versions.New(s.st, d.Now)
	}
	return s
}

// Run serves until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	if s.st != nil {
		go func() {
			if err := s.sampler(ctx); err != nil && ctx.Err() == nil {
				s.deps.Log.Error("health sampler stopped", "err", err)
			}
		}()
	}
	return bus.Run(ctx, s.deps.NC, bus.ServiceConfig{
		Name: Name, Version: "1.0.0", Description: "status, health and configuration versions",
		Log:       s.deps.Log,
		Endpoints: s.Endpoints(),
	})
}

func (s *Service) status(ctx context.Context, _ *api.None) (*api.Status, error) {
	st := &api.Status{
		API:           proto.Banner,
		RouterVersion: version.Version,
		PerNetwork:    map[string]int64{},
		Antispoof:     "off",
		ServerTime:    s.deps.Now().Format("2006-01-02 15:04:05"),
	}
	v, _, _ := s.gather.Do("status", func() (any, error) {
		return s.others(context.WithoutCancel(ctx)), nil
	})
	o := v.(*others)
	counts, ifs := o.counts, o.ifs
	st.DHCPService = o.dhcp
	if o.spoof != nil && o.spoof.Mode != "" {
		st.Antispoof = o.spoof.Mode
	}
	if counts != nil {
		st.TotalClients, st.OnlineClients = counts.Total, counts.Online
		if counts.PerNetwork != nil {
			st.PerNetwork = counts.PerNetwork
		}
	}
	if ifs != nil {
		st.Interfaces = ifs.Interfaces
	}
	return st, nil
}

// others is what GET /status asks the other services.
type others struct {
	counts *api.ClientCounts
	ifs    *api.InterfaceCount
	spoof  *api.AntispoofMode
	dhcp   string
}

// others asks them together: every question is sent before any answer
// is waited for (no goroutine per question), so the answer takes as long
// as the slowest service, not the sum of them.
func (s *Service) others(ctx context.Context) *others {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	counts := bus.Start(ctx, s.deps.NC, api.ClientsSummary, &api.None{})
	spoof := bus.Start(ctx, s.deps.NC, api.AntispoofModeGet, &api.None{})
	ifs := bus.Start(ctx, s.deps.NC, api.InterfacesCount, &api.None{})
	dhcp := bus.AskUp(s.deps.NC, "dhcp", 300*time.Millisecond)
	o := &others{
		counts: answer(s, api.ClientsSummary, counts),
		spoof:  answer(s, api.AntispoofModeGet, spoof),
		ifs:    answer(s, api.InterfacesCount, ifs),
		dhcp:   "stopped",
	}
	if dhcp() {
		o.dhcp = "running"
	}
	return o
}

// answer is another service's answer; a service that is not running leaves
// the field at its zero value rather than failing the whole status.
func answer[Resp any](s *Service, op api.Op[api.None, Resp], p *bus.Pending[Resp]) *Resp {
	out, err := p.Wait()
	if err != nil {
		s.deps.Log.Debug("status: service did not answer", "subject", op.Subject(), "err", err)
		return nil
	}
	return out
}

// Endpoints are the service's operations; Run serves them on the bus, and
// benchmarks call them directly to measure the bus hop.
func (s *Service) Endpoints() []bus.Endpoint {
	eps := []bus.Endpoint{bus.Bind(api.StatusGet, s.status), bus.Bind(api.DoctorGet, s.doctor), bus.Bind(api.AlertsGet, s.alerts)}
	if s.versions != nil {
		eps = append(eps,
			bus.Bind(api.ConfigStatus, s.configStatus),
			bus.Bind(api.ConfigVersions, s.configVersions),
			bus.Bind(api.ConfigSave, s.configSave),
			bus.Bind(api.ConfigAutoSave, s.configAutoSave),
			bus.Bind(api.ConfigDiff, s.configDiff),
			bus.Bind(api.ConfigShow, s.configShow),
			bus.Bind(api.Restore, s.restore),
			bus.Bind(api.AlarmsList, s.listAlarms),
			bus.Bind(api.AlarmsAck, s.ackAlarm),
			bus.Bind(api.HealthGet, s.listHealth),
			bus.Endpoint{Subject: api.BackupGet.Subject(), Handler: s.backup, Concurrency: 2},
		)
	}
	return eps
}
