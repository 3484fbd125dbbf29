package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/graph/chart"
	"routerd.dev/services/graph/series"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/mac"
)

// graphArea is the sampler's and the graphs' state in the service: the
// samples' stores (opened on first use: the router's interfaces and
// clients in StateDir/samples, the OLTs' ports and ONTs, kept longer, in
// StateDir/olt-samples) and the counters of each sampler's last round,
// which its next round's rates are taken against.
type graphArea struct {
	mu      sync.Mutex
	store   *series.Store
	olts    *series.Store
	last    map[string]reading
	oltLast map[string]reading
}

// reading is one series' counters at one time; scale turns their
// difference per second into the graph's unit (8: bytes to bits).
type reading struct {
	at      time.Time
	in, out uint64
	scale   float64
}

// Series names in the store: an interface, a client (by MAC), or another
// shaped subscriber (a fibre service's id, should the shaper report one).
// The OLTs' series: "pon:<olt>:<F/S/P>", "up:<olt>:<F/S/P>",
// "ont:<olt>:<F/S/P>:<id>" and its error counters "onterr:...".
const (
	ifacePrefix  = "if:"
	clientPrefix = "mac:"
	idPrefix     = "id:"
	ponPrefix    = "pon:"
	uplinkPrefix = "up:"
	ontPrefix    = "ont:"
	ontErrPrefix = "onterr:"
)

// graphEndpoints are /graph/*: each answers a PNG (bus.Raw).
func (s *Service) graphEndpoints() []bus.Endpoint {
	return []bus.Endpoint{
		bus.BindRaw(api.GraphGet, func(_ context.Context, in *api.GraphRequest) (bus.Raw, error) {
			return pngOf(s.Graph(in.Name, in.Period))
		}),
		bus.BindRaw(api.GraphOLTPort, func(_ context.Context, in *api.GraphOLTPortRequest) (bus.Raw, error) {
			return pngOf(s.OLTPortGraph(in))
		}),
		bus.BindRaw(api.GraphONT, func(_ context.Context, in *api.GraphONTRequest) (bus.Raw, error) {
			return pngOf(s.ONTGraph(in))
		}),
	}
}

// pngOf is a drawn graph as the answer.
func pngOf(img []byte, err error) (bus.Raw, error) {
	return bus.Raw{ContentType: "image/png", Data: img}, err
}

// samples returns the router's series' store, opening it on first use.
func (s *Service) samples() (*series.Store, error) {
	return s.openStore(&s.graphs.store, "samples", series.Levels)
}

// oltSamples returns the OLTs' series' store, opening it on first use.
func (s *Service) oltSamples() (*series.Store, error) {
	return s.openStore(&s.graphs.olts, "olt-samples", series.LongLevels)
}

func (s *Service) openStore(st **series.Store, dir string, levels []series.Level) (*series.Store, error) {
	g := &s.graphs
	g.mu.Lock()
	defer g.mu.Unlock()
	if *st != nil {
		return *st, nil
	}
	if s.deps.StateDir == "" {
		return nil, errors.New("graph: no state directory for the samples")
	}
	o, err := series.Open(filepath.Join(s.deps.StateDir, dir), s.deps.SampleEvery, levels)
	if err != nil {
		return nil, err
	}
	*st = o
	return o, nil
}

// closeSamples closes the stores (the service is stopping).
func (s *Service) closeSamples() {
	g := &s.graphs
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, st := range []**series.Store{&g.store, &g.olts} {
		if *st != nil {
			_ = (*st).Close()
			*st = nil
		}
	}
}

var serviceID = regexp.MustCompile(`^svc_[0-9a-f]{8}$`)

// Graph draws name's graph over period: name is an interface that has
// samples, a client's MAC in any usual format, or a shaped subscriber's
// id.
func (s *Service) Graph(name, period string) ([]byte, error) {
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
	if !st.Has(key) {
		if serviceID.MatchString(name) {
			return nil, apierr.NotFound("no such service: %s", name)
		}
		return nil, apierr.NotFound("no interface or client %s in the samples (samples are collected every %s)", name, s.deps.SampleEvery)
	}
	return s.draw(st, []string{key}, period, chart.Graph{Title: title, InName: inName, OutName: outName})
}

// OLTPortGraph draws an OLT's PON or uplink port, or the sum of a card's.
func (s *Service) OLTPortGraph(in *api.GraphOLTPortRequest) ([]byte, error) {
	st, err := s.oltSamples()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "samples not readable")
	}
	prefix, what := ponPrefix, "PON port"
	if in.PON != nil && *in.PON == 0 {
		prefix, what = uplinkPrefix, "uplink port"
	}
	var keys []string
	if strings.Count(in.Port, "/") == 1 { // a card: its ports summed
		keys = st.Names(prefix + in.OLT + ":" + in.Port + "/")
		what = strings.Replace(what, "port", "card", 1)
	} else if st.Has(prefix + in.OLT + ":" + in.Port) {
		keys = []string{prefix + in.OLT + ":" + in.Port}
	}
	if len(keys) == 0 {
		return nil, apierr.NotFound("no samples of OLT %s %s %s (OLT counters are read every %s)", in.OLT, what, in.Port, s.deps.SampleEvery)
	}
	return s.draw(st, keys, in.Period, chart.Graph{Title: fmt.Sprintf("OLT %s %s %s", in.OLT, what, in.Port), InName: "In", OutName: "Out"})
}

// ONTGraph draws one ONT's traffic or error counters.
func (s *Service) ONTGraph(in *api.GraphONTRequest) ([]byte, error) {
	st, err := s.oltSamples()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "samples not readable")
	}
	g := chart.Graph{Title: fmt.Sprintf("OLT %s ONT %s:%d", in.OLT, in.Port, *in.ONT), InName: "Download", OutName: "Upload"}
	key := fmt.Sprintf("%s%s:%s:%d", ontPrefix, in.OLT, in.Port, *in.ONT)
	if in.What == "errors" {
		key = ontErrPrefix + strings.TrimPrefix(key, ontPrefix)
		g.Title += " errors"
		g.InName, g.OutName, g.Unit = "Upstream", "Downstream", "frames/s"
	}
	if !st.Has(key) {
		return nil, apierr.NotFound("no samples of OLT %s ONT %d on %s (OLT counters are read every %s)", in.OLT, *in.ONT, in.Port, s.deps.SampleEvery)
	}
	return s.draw(st, []string{key}, in.Period, g)
}

// draw reads the series of keys over period (summed point by point when
// there are several: a card's ports) and draws them with g's title,
// names and unit; 404 while they have no data in the period.
func (s *Service) draw(st *series.Store, keys []string, period string, g chart.Graph) ([]byte, error) {
	level := st.Level(period)
	if level < 0 {
		return nil, apierr.Invalid("period", "period %q is not one of this graph's", period)
	}
	var pts []series.Point
	for _, k := range keys {
		one, _, err := st.Read(k, level, s.deps.Now())
		if err != nil {
			return nil, apierr.Internal(err.Error(), "samples not readable")
		}
		if pts == nil {
			pts = one
			continue
		}
		for i := range pts {
			pts[i].In, pts[i].Out = plus(pts[i].In, one[i].In), plus(pts[i].Out, one[i].Out)
			pts[i].InMax, pts[i].OutMax = plus(pts[i].InMax, one[i].InMax), plus(pts[i].OutMax, one[i].OutMax)
			pts[i].Known = pts[i].Known || one[i].Known
		}
	}
	known := false
	for _, p := range pts {
		known = known || p.Known
	}
	if !known {
		return nil, apierr.NotFound("no %s data for %s yet (samples are collected every %s)", period, g.Title, s.deps.SampleEvery)
	}
	step := time.Duration(st.LevelOf(level).Factor) * st.Step()
	g.Start, g.End, g.Step = pts[0].Start.UTC(), pts[len(pts)-1].Start.Add(step).UTC(), step
	g.Title = fmt.Sprintf("%s - %s (%s to %s UTC)", g.Title, period, g.Start.Format("2006-01-02 15:04"), g.End.Format("2006-01-02 15:04"))
	for _, p := range pts {
		g.Points = append(g.Points, chart.Point{T: p.Start.UTC(), In: p.In, Out: p.Out, InMax: p.InMax, OutMax: p.OutMax})
	}
	img, err := chart.Draw(&g)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "graph not drawn")
	}
	return img, nil
}

// plus adds rates where either is known (a card's port without data
// counts as none).
func plus(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return a + b
}

// runSampler samples the counters the graphs are drawn from until ctx
// ends: the router's (interfaces, clients) and, beside them so that a
// slow OLT does not hold the router's rounds, the registered OLTs'.
func (s *Service) runSampler(ctx context.Context) {
	defer s.closeSamples()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.every(ctx, "OLT", s.oltRound)
	}()
	s.every(ctx, "router", s.sampleRound)
}

// every runs round in the middle of each sampling step (so that a
// round's time falls well inside its step, whatever the timer's jitter)
// until ctx ends; a round longer than a step skips the steps it
// overran.
func (s *Service) every(ctx context.Context, what string, round func(context.Context, time.Time) error) {
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
		if err := round(ctx, s.deps.Now()); err != nil && ctx.Err() == nil {
			s.deps.Log.Warn("graph samples not taken", "counters", what, "err", err)
		}
	}
}

// sampleRound reads every interface's and every shaped subscriber's
// counters and stores the rates since the last round at the round's
// time.
func (s *Service) sampleRound(ctx context.Context, now time.Time) error {
	st, err := s.samples()
	if err != nil {
		return err
	}
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
	kept := func(k string) bool { return err != nil && !strings.HasPrefix(k, ifacePrefix) }
	samples := rates(s.graphs.last, readings, kept)
	s.graphs.last = readings
	if len(samples) == 0 {
		return nil
	}
	return st.Write(now, samples)
}

// oltRound reads the counters of every registered OLT's PON and uplink
// ports and of every ONT (the olt service's counters operation) and
// stores the rates since the last round at the round's time. An OLT that
// does not answer has no samples this round.
func (s *Service) oltRound(ctx context.Context, now time.Time) error {
	list, err := bus.Invoke(ctx, s.deps.NC, api.OLTsList, &api.None{})
	if err != nil {
		s.deps.Log.Debug("no OLT list this round", "err", err)
		return nil
	}
	readings := map[string]reading{}
	answered, listed := map[string]bool{}, map[string]bool{}
	for _, o := range list.OLTs {
		listed[o.Name] = true
		if err := s.oltCounters(ctx, o.Name, readings); err != nil {
			s.deps.Log.Debug("no OLT counters this round", "olt", o.Name, "err", err)
			continue
		}
		answered[o.Name] = true
	}
	if len(list.OLTs) == 0 && len(s.graphs.oltLast) == 0 {
		return nil
	}
	st, err := s.oltSamples()
	if err != nil {
		return err
	}
	kept := func(k string) bool {
		_, rest, _ := strings.Cut(k, ":")
		name, _, _ := strings.Cut(rest, ":")
		return listed[name] && !answered[name] // a removed OLT's go
	}
	samples := rates(s.graphs.oltLast, readings, kept)
	s.graphs.oltLast = readings
	if len(samples) == 0 {
		return nil
	}
	return st.Write(now, samples)
}

// oltCounter is one port's or ONT's counters in the counters operation's
// result.
type oltCounter struct {
	Port   string           `json:"port"`
	ONTID  *int             `json:"ont_id"`
	Kind   string           `json:"kind"`
	Values map[string]int64 `json:"values"`
}

// oltCounters adds one OLT's readings: PON and uplink ports (in: what
// the port received, out: what it sent), ONTs (in: download, bytes sent
// down to the ONT; out: upload) and the ONTs' error and dropped frames
// (in: upstream, out: downstream).
func (s *Service) oltCounters(ctx context.Context, olt string, into map[string]reading) error {
	// A typed request carries every field: timeout is the operation's
	// default, 40 s, spelled out (0 would be refused).
	opts := api.OLTOptions{OLT: olt, Timeout: 40}
	for _, args := range []api.OLTCounters{{OLTOptions: opts, Uplinks: true}, {OLTOptions: opts, ONTs: true}} {
		ans, err := bus.Invoke(ctx, s.deps.NC, api.OLTCountersOp, &args)
		if err != nil {
			return err
		}
		if !ans.OK || ans.Result == nil {
			return fmt.Errorf("graph: OLT %s counters: code %d", olt, ans.Code)
		}
		at := s.deps.Now()
		raw, err := json.Marshal(ans.Result)
		if err != nil {
			return err
		}
		var res struct {
			Counters []oltCounter `json:"counters"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("graph: OLT %s counters unreadable: %w", olt, err)
		}
		for _, c := range res.Counters {
			v := func(k string) uint64 { return uint64(max(c.Values[k], 0)) }
			switch {
			case c.Kind == "pon":
				into[ponPrefix+olt+":"+c.Port] = reading{at, v("received_bytes"), v("sent_bytes"), 8}
			case c.Kind == "uplink":
				into[uplinkPrefix+olt+":"+c.Port] = reading{at, v("received_bytes"), v("sent_bytes"), 8}
			case c.Kind == "ont" && c.ONTID != nil:
				id := fmt.Sprintf("%s:%s:%d", olt, c.Port, *c.ONTID)
				into[ontPrefix+id] = reading{at, v("downstream_bytes_sent"), v("upstream_bytes_received"), 8}
				var up, down uint64
				for k, n := range c.Values {
					if !strings.Contains(k, "error") && !strings.Contains(k, "drop") {
						continue
					}
					if strings.HasPrefix(k, "downstream") {
						down += uint64(max(n, 0))
					} else {
						up += uint64(max(n, 0))
					}
				}
				into[ontErrPrefix+id] = reading{at, up, down, 1}
			}
		}
	}
	return nil
}

// rates turns counters into rates (bits per second for bytes) against
// the last round's readings. A counter that went down was restarted (an
// interface recreated, a subscriber's class remade, an OLT rebooted): no
// sample for that step. The readings of last that now lacks and kept
// says so of (a source that did not answer this round) are carried into
// now, so that memory follows the series that exist.
func rates(last, now map[string]reading, kept func(string) bool) []series.Sample {
	var out []series.Sample
	for k, r := range now {
		p, ok := last[k]
		if !ok || r.in < p.in || r.out < p.out || !r.at.After(p.at) {
			continue
		}
		dt := r.at.Sub(p.at).Seconds()
		out = append(out, series.Sample{Name: k, In: float64(r.in-p.in) * r.scale / dt, Out: float64(r.out-p.out) * r.scale / dt})
	}
	for k, p := range last {
		if _, ok := now[k]; !ok && kept(k) {
			now[k] = p
		}
	}
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
		out[ifacePrefix+a.Name] = reading{at: at, in: a.Statistics.RxBytes, out: a.Statistics.TxBytes, scale: 8}
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
			out[key] = reading{at: at, in: c.DownBytes, out: c.UpBytes, scale: 8}
		}
		if page.Next == "" || page.Next == after {
			return out, nil
		}
		after = page.Next
	}
}
