package graph

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/graph/chart"
	"routerd.dev/services/graph/series"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/mac"
)

// graphArea is the sampler's and the graphs' state in the service: the
// samples' store (opened on first use, in StateDir/samples) and the
// counters of the last round, which the next round's rates are taken
// against.
type graphArea struct {
	mu    sync.Mutex
	store *series.Store
	last  map[string]reading
}

// reading is one series' byte counters at one time.
type reading struct {
	at      time.Time
	in, out uint64
}

// Series names in the store: an interface, a client (by MAC), or another
// shaped subscriber (a fibre service's id, should the shaper report one).
const (
	ifacePrefix  = "if:"
	clientPrefix = "mac:"
	idPrefix     = "id:"
)

// graphEndpoints are /graph/*. GET /graph/{name} answers a PNG (bus.Raw),
// so it is bound by hand: decoded and checked by the operation's rules
// as Bind would, its answer not JSON.
func (s *Service) graphEndpoints() []bus.Endpoint {
	m := api.GraphGet.Describe()
	return []bus.Endpoint{{Subject: m.Subject(), Concurrency: m.ConcurrencyOrDefault(), Handler: s.graphGet}}
}

func (s *Service) graphGet(ctx context.Context, req *pb.Request) (int, any, error) {
	var in api.GraphRequest
	if err := api.GraphGet.Decode(bus.Arguments(req), &in); err != nil {
		return 0, nil, err
	}
	img, err := s.Graph(in.Name, in.Period)
	if err != nil {
		return 0, nil, err
	}
	return 200, bus.Raw{ContentType: "image/png", Data: img}, nil
}

// samples returns the store, opening it on first use.
func (s *Service) samples() (*series.Store, error) {
	g := &s.graphs
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.store != nil {
		return g.store, nil
	}
	if s.deps.StateDir == "" {
		return nil, errors.New("graph: no state directory for the samples")
	}
	st, err := series.Open(filepath.Join(s.deps.StateDir, "samples"), s.deps.SampleEvery)
	if err != nil {
		return nil, err
	}
	g.store = st
	return st, nil
}

// closeSamples closes the store (the service is stopping).
func (s *Service) closeSamples() {
	g := &s.graphs
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.store != nil {
		_ = g.store.Close()
		g.store = nil
	}
}

var serviceID = regexp.MustCompile(`^svc_[0-9a-f]{8}$`)

// Graph draws name's graph over period: name is an interface that has
// samples, a client's MAC in any usual format, or a shaped subscriber's
// id.
func (s *Service) Graph(name, period string) ([]byte, error) {
	level := series.LevelIndex(period)
	if level < 0 {
		return nil, apierr.Invalid("period", "period must be hour, day, week, month or year")
	}
	st, err := s.samples()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "samples not readable")
	}
	key, title, inName, outName := ifacePrefix+name, "Interface "+name, "In", "Out"
	if !st.Has(key) {
		if m, err := mac.Normalize(name); err == nil {
			key, title, inName, outName = clientPrefix+m, "Client "+m, "Download", "Upload"
		} else {
			key, title, inName, outName = idPrefix+name, "Service "+name, "Download", "Upload"
		}
	}
	now := s.deps.Now()
	pts, ok, err := st.Read(key, level, now)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "samples not readable")
	}
	known := false
	for _, p := range pts {
		known = known || p.Known
	}
	switch {
	case !ok && serviceID.MatchString(name):
		return nil, apierr.NotFound("no such service: %s", name)
	case !ok:
		return nil, apierr.NotFound("no interface or client %s in the samples (samples are collected every %s)", name, s.deps.SampleEvery)
	case !known:
		return nil, apierr.NotFound("no %s data for %s yet (samples are collected every %s)", period, name, s.deps.SampleEvery)
	}
	step := time.Duration(series.Levels[level].Factor) * st.Step()
	g := &chart.Graph{
		Title:  fmt.Sprintf("%s - %s (%s to %s UTC)", title, period, pts[0].Start.UTC().Format("2006-01-02 15:04"), pts[len(pts)-1].Start.Add(step).UTC().Format("2006-01-02 15:04")),
		InName: inName, OutName: outName,
		Start: pts[0].Start.UTC(), End: pts[len(pts)-1].Start.Add(step).UTC(), Step: step,
	}
	for _, p := range pts {
		g.Points = append(g.Points, chart.Point{T: p.Start.UTC(), In: p.In, Out: p.Out, InMax: p.InMax, OutMax: p.OutMax})
	}
	img, err := chart.Draw(g)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "graph not drawn")
	}
	return img, nil
}

// runSampler samples the counters the graphs are drawn from until ctx
// ends: a round in the middle of each step (so that a round's time falls
// well inside its step, whatever the timer's jitter).
func (s *Service) runSampler(ctx context.Context) {
	defer s.closeSamples()
	step := s.deps.SampleEvery
	for {
		now := s.deps.Now()
		next := now.Truncate(step).Add(step / 2)
		if !next.After(now) {
			next = next.Add(step)
		}
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := s.sampleRound(ctx); err != nil && ctx.Err() == nil {
			s.deps.Log.Warn("graph samples not taken", "err", err)
		}
	}
}

// sampleRound reads every interface's and every shaped subscriber's
// counters and stores the rates since the last round.
func (s *Service) sampleRound(ctx context.Context) error {
	st, err := s.samples()
	if err != nil {
		return err
	}
	now := s.deps.Now()
	readings, err := s.interfaceCounters(now)
	if err != nil {
		return err
	}
	clients, err := s.clientCounters(ctx)
	if err != nil {
		// The shaper is not running (or busy): this round has no
		// client samples, and their next rates are taken over two steps.
		s.deps.Log.Debug("no client counters this round", "err", err)
	}
	for k, r := range clients {
		readings[k] = r
	}
	samples := s.rates(readings, err == nil)
	if len(samples) == 0 {
		return nil
	}
	return st.Write(now, samples)
}

// rates turns counters into bits per second against the last round's
// readings. A counter that went down was restarted (an interface
// recreated, a subscriber's class remade): no sample for that step. The
// readings kept are this round's (and the clients' of before when this
// round had none of them), so memory follows the series that exist.
func (s *Service) rates(now map[string]reading, withClients bool) []series.Sample {
	g := &s.graphs
	var out []series.Sample
	for k, r := range now {
		p, ok := g.last[k]
		if !ok || r.in < p.in || r.out < p.out || !r.at.After(p.at) {
			continue
		}
		dt := r.at.Sub(p.at).Seconds()
		out = append(out, series.Sample{Name: k, In: float64(r.in-p.in) * 8 / dt, Out: float64(r.out-p.out) * 8 / dt})
	}
	if !withClients {
		for k, p := range g.last {
			if _, ok := now[k]; !ok && !strings.HasPrefix(k, ifacePrefix) {
				now[k] = p
			}
		}
	}
	g.last = now
	return out
}

// interfaceCounters reads each interface's byte counters in the router's
// namespace: in is what it received, out what it sent.
func (s *Service) interfaceCounters(at time.Time) (map[string]reading, error) {
	if s.deps.NS == nil {
		return nil, errors.New("graph: no namespace to sample")
	}
	h, err := s.deps.NS.Netlink()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("graph: interfaces not listed: %w", err)
	}
	out := make(map[string]reading, len(links))
	for _, l := range links {
		a := l.Attrs()
		if a.Statistics == nil {
			continue
		}
		out[ifacePrefix+a.Name] = reading{at: at, in: a.Statistics.RxBytes, out: a.Statistics.TxBytes}
	}
	return out, nil
}

// clientCounters pages the shaper's counters: in is what a subscriber
// downloaded (its class), out what it uploaded (its police rule).
func (s *Service) clientCounters(ctx context.Context) (map[string]reading, error) {
	// A round waits for the shaper at most half a step: the next round
	// is not held up by a shaper that does not answer.
	ctx, cancel := context.WithTimeout(ctx, s.deps.SampleEvery/2)
	defer cancel()
	out := map[string]reading{}
	after := ""
	for {
		page, err := bus.Invoke(ctx, s.deps.NC, api.ShaperCounters, &api.ShapePageRequest{After: after, Limit: 10000})
		if err != nil {
			return nil, err
		}
		at := page.At
		if at.IsZero() {
			at = s.deps.Now()
		}
		for _, c := range page.Counters {
			key := idPrefix + c.ID
			if m, err := mac.Normalize(c.ID); err == nil {
				key = clientPrefix + m
			}
			out[key] = reading{at: at, in: c.DownBytes, out: c.UpBytes}
		}
		if page.Next == "" || page.Next == after {
			return out, nil
		}
		after = page.Next
	}
}
