package olt

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/olt/driver"
	"routerd.dev/shared/store"
)

// DefaultPollEvery is how often the poller reads each registered OLT for
// the monitor's events.
const DefaultPollEvery = time.Minute

// Optical thresholds of a GPON ONT's received power (class B+): outside
// them the poller publishes ont.optical. Deps.RxMinDBm and RxMaxDBm
// (configuration olt_rx_min_dbm, olt_rx_max_dbm) replace them, e.g. -29
// and -8 for class C+ optics.
const (
	MinRxDBm = -27.0
	MaxRxDBm = -8.0
)

// rxThresholds are the poller's optical thresholds for an OLT: its
// record's (rx_min_dbm, rx_max_dbm), else the service's, else class B+.
// A pair left without room between them (a record imported as it was)
// falls back to the service's.
func (s *Service) rxThresholds(rec *api.OLTRecord) (lo, hi float64) {
	lo, hi = MinRxDBm, MaxRxDBm
	if s.deps.RxMinDBm != 0 {
		lo = s.deps.RxMinDBm
	}
	if s.deps.RxMaxDBm != 0 {
		hi = s.deps.RxMaxDBm
	}
	if rec == nil {
		return lo, hi
	}
	l, h := lo, hi
	if rec.RxMinDBm != 0 {
		l = rec.RxMinDBm
	}
	if rec.RxMaxDBm != 0 {
		h = rec.RxMaxDBm
	}
	if l >= h {
		return lo, hi
	}
	return l, h
}

// Events of the poller, on router.events.olt.<kind>.
const (
	EventONTFound       = "ont.found"       // new in autofind: {olt, port, sn, vendor}
	EventONTOnline      = "ont.online"      // {olt, port, ont_id, sn, run_state}
	EventONTOffline     = "ont.offline"     // {olt, port, ont_id, sn, run_state, cause}
	EventONTOptical     = "ont.optical"     // {olt, port, ont_id, sn, rx_power_dbm, min, max}
	EventOLTUnreachable = "olt.unreachable" // {olt, host, error}
	EventOLTReachable   = "olt.reachable"   // {olt, host}
)

// seen is what the poller knew of one OLT after its last round.
type seen struct {
	ok       bool // a round has completed
	down     bool // unreachable at the last round
	autofind map[string]bool
	online   map[string]bool // port/id -> online
	lowRx    map[string]bool // port/id -> outside thresholds
}

// poller reads every registered OLT each period (one replica per OLT: a
// TryLock on olt-poll/<name>), holding the OLT's write lock while it
// reads so a poll never overlaps a write, and turns differences from the
// previous round into events. The first round of each OLT only learns.
type poller struct {
	s     *Service
	mu    sync.Mutex
	state map[string]*seen
}

func (s *Service) poll(ctx context.Context) {
	every := s.deps.PollEvery
	if every == 0 {
		every = DefaultPollEvery
	}
	p := &poller{s: s, state: map[string]*seen{}}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ts, err := s.targets(ctx, "")
		if err != nil {
			continue
		}
		for _, tg := range ts {
			p.round(ctx, tg, every)
		}
	}
}

func (p *poller) round(ctx context.Context, t *target, every time.Duration) {
	s := p.s
	name := t.ref.Name
	claim, err := store.TryLock(ctx, s.deps.KV, "olt-poll/"+name)
	if err != nil {
		return // another replica polls this OLT
	}
	defer claim.Unlock(context.WithoutCancel(ctx))
	write, err := store.TryLock(ctx, s.deps.KV, t.lock)
	if err != nil {
		return // a write is running: the next round will read
	}
	defer write.Unlock(context.WithoutCancel(ctx))

	p.mu.Lock()
	st := p.state[name]
	if st == nil {
		st = &seen{}
		p.state[name] = st
	}
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, max(every, driver.MinTimeout))
	defer cancel()
	d, err := s.drivers.Get(t.cfg)
	if err == nil {
		err = p.read(ctx, d, t, st)
	}
	if err != nil {
		if !st.down {
			st.down = true
			s.log.Warn("olt unreachable", "olt", name, "host", t.ref.Host, "error", err)
			s.pub.Publish(EventOLTUnreachable, nil, map[string]any{"olt": name, "host": t.ref.Host, "error": err.Error()})
		}
		return
	}
	if st.down {
		st.down = false
		s.log.Info("olt reachable again", "olt", name, "host", t.ref.Host)
		s.pub.Publish(EventOLTReachable, nil, map[string]any{"olt": name, "host": t.ref.Host})
	}
}

func (p *poller) read(ctx context.Context, d driver.Driver, t *target, st *seen) error {
	s := p.s
	name := t.ref.Name
	opts := driver.Options{Timeout: driver.MinTimeout}
	af, err := d.Autofind(ctx, opts)
	if err != nil {
		return err
	}
	onus, err := d.ONUs(ctx, driver.PortArgs{Options: opts})
	if err != nil {
		return err
	}
	found := map[string]bool{}
	for _, o := range af.ONTs {
		found[o.Port+" "+o.SN] = true
		if st.ok && !st.autofind[o.Port+" "+o.SN] {
			s.pub.Publish(EventONTFound, nil, map[string]any{"olt": name, "port": o.Port, "sn": o.SN, "vendor": o.Vendor})
		}
	}
	online := map[string]bool{}
	bySN := map[string]driver.ONT{}
	ports := map[string]bool{}
	for _, o := range onus.ONTs {
		k := ontKey(o.Port, o.ID)
		bySN[k] = o
		on := o.RunState == "online"
		online[k] = on
		if on {
			ports[o.Port] = true
		}
		was, known := st.online[k]
		if !st.ok || !known || was == on {
			continue
		}
		data := map[string]any{"olt": name, "port": o.Port, "ont_id": o.ID, "sn": o.SN, "run_state": o.RunState}
		if on {
			s.pub.Publish(EventONTOnline, nil, data)
		} else {
			// The cause (LOS, dying-gasp) is the OLT's last down cause of
			// the ONT; the ONT table does not carry it.
			data["cause"] = "unknown"
			if dc, ok := d.(interface {
				ONTDownCause(context.Context, string, int) (string, error)
			}); ok {
				if c, err := dc.ONTDownCause(ctx, o.Port, o.ID); err == nil && c != "" {
					data["cause"] = c
				}
			}
			s.pub.Publish(EventONTOffline, nil, data)
		}
	}
	lowRx := map[string]bool{}
	var portList []string
	for p := range ports {
		portList = append(portList, p)
	}
	sort.Strings(portList)
	for _, port := range portList {
		opt, err := d.ONTOptical(ctx, driver.ONTOpticalArgs{Options: opts, Port: port})
		if err != nil {
			return err
		}
		for _, r := range opt.ONTs {
			if r.RxPowerDBm == nil {
				continue
			}
			k := ontKey(port, r.ID)
			var rec *api.OLTRecord
			if t.rec != nil {
				rec = &t.rec.OLTRecord
			}
			lo, hi := s.rxThresholds(rec)
			out := *r.RxPowerDBm < lo || *r.RxPowerDBm > hi
			lowRx[k] = out
			if out && !st.lowRx[k] {
				s.pub.Publish(EventONTOptical, nil, map[string]any{"olt": name, "port": port, "ont_id": r.ID,
					"sn": bySN[k].SN, "rx_power_dbm": *r.RxPowerDBm, "min": lo, "max": hi})
			}
		}
	}
	st.ok, st.autofind, st.online, st.lowRx = true, found, online, lowRx
	return nil
}

func ontKey(port string, id int) string { return port + "/" + strconv.Itoa(id) }
