package system

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
)

// The alarm register and the health readings live under /router/system/:
//
//	alarms/<id, 10 digits>     an alarm (api.AlarmRecord and its key)
//	health/<unix seconds, 12>  a health reading, deleted after a day
//
// One system replica samples (it holds /router/locks/system/sampler): each
// interval it takes a reading and runs the doctor's checks; a critical or
// warning finding without an active alarm raises one, an active alarm
// whose finding is gone is cleared.

// DefaultSampleEvery is the sampling interval.
const DefaultSampleEvery = time.Minute

// healthKeep is how long readings are kept.
const healthKeep = 24 * time.Hour

const timeLayout = "2006-01-02 15:04:05"

type alarmDoc struct {
	api.AlarmRecord
	// Key identifies the problem: area and problem text.
	Key string `json:"key"`
}

func (s *Service) alarmKey(id int64) string { return s.st.Key("alarms", fmt.Sprintf("%010d", id)) }

// alarms reads every alarm, newest first.
func (s *Service) allAlarms(ctx context.Context) ([]alarmDoc, error) {
	items, err := store.List[alarmDoc](ctx, s.st, s.st.Key("alarms")+"/")
	if err != nil {
		return nil, err
	}
	out := make([]alarmDoc, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it.Value
	}
	return out, nil
}

func (s *Service) listAlarms(ctx context.Context, in *api.AlarmFilter) (*api.AlarmList, error) {
	all, err := s.allAlarms(ctx)
	if err != nil {
		return nil, err
	}
	out := &api.AlarmList{Alarms: []api.AlarmRecord{}}
	for _, a := range all {
		if a.ClearedAt == "" {
			out.Active++
		}
		keep := in.State == "all" || in.State == "" ||
			in.State == "active" && a.ClearedAt == "" || in.State == "cleared" && a.ClearedAt != "" ||
			in.State == "unacknowledged" && a.AcknowledgedAt == ""
		if keep && len(out.Alarms) < in.N {
			out.Alarms = append(out.Alarms, a.AlarmRecord)
		}
	}
	out.Count = len(out.Alarms)
	return out, nil
}

func (s *Service) ackAlarm(ctx context.Context, in *api.AlarmRef) (*api.AlarmAckAnswer, error) {
	for attempt := 0; attempt < 5; attempt++ {
		a, rev, err := store.Get[alarmDoc](ctx, s.st, s.alarmKey(in.ID))
		if errors.Is(err, store.ErrNotFound) {
			return nil, apierr.NotFound("No such alarm: %d", in.ID).With("field", "id")
		}
		if err != nil {
			return nil, err
		}
		if a.AcknowledgedAt != "" {
			return &api.AlarmAckAnswer{Result: api.Result{Message: "Alarm already acknowledged"}, Alarm: a.AlarmRecord}, nil
		}
		a.AcknowledgedAt, a.AcknowledgedBy = s.deps.Now().Format(timeLayout), savedBy(ctx)
		_, err = s.st.Txn().IfRevision(s.alarmKey(in.ID), rev).Put(s.alarmKey(in.ID), a).Commit(ctx)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &api.AlarmAckAnswer{Result: api.Result{Message: "Alarm acknowledged"}, Alarm: a.AlarmRecord}, nil
	}
	return nil, apierr.Conflict("alarm %d is being changed; try again", in.ID)
}

// reconcileAlarms raises an alarm for each critical or warning finding
// that has none active, and clears active alarms whose finding is gone.
func (s *Service) reconcileAlarms(ctx context.Context, st *store.Store, findings []api.Finding) error {
	all, err := s.allAlarms(ctx)
	if err != nil {
		return err
	}
	active := map[string]alarmDoc{}
	var last int64
	for _, a := range all {
		last = max(last, a.ID)
		if a.ClearedAt == "" {
			active[a.Key] = a
		}
	}
	now := s.deps.Now().Format(timeLayout)
	seen := map[string]bool{}
	for _, f := range findings {
		if f.Severity != "critical" && f.Severity != "warning" {
			continue
		}
		key := f.Area + "|" + f.Problem
		if seen[key] {
			continue
		}
		seen[key] = true
		if _, ok := active[key]; ok {
			continue
		}
		last++
		a := alarmDoc{AlarmRecord: api.AlarmRecord{ID: last, Severity: f.Severity, Area: f.Area, Problem: f.Problem,
			Detail: f.Detail, Fix: f.Fix, RaisedAt: now}, Key: key}
		if _, err := st.Txn().IfAbsent(s.alarmKey(a.ID)).Put(s.alarmKey(a.ID), a).Commit(ctx); err != nil {
			return fmt.Errorf("raising alarm %d: %w", a.ID, err)
		}
		s.deps.Log.Warn("alarm raised", "id", a.ID, "severity", a.Severity, "area", a.Area, "problem", a.Problem)
	}
	for key, a := range active {
		if seen[key] {
			continue
		}
		a.ClearedAt = now
		if _, err := st.Txn().Put(s.alarmKey(a.ID), a).Commit(ctx); err != nil {
			return fmt.Errorf("clearing alarm %d: %w", a.ID, err)
		}
		s.deps.Log.Info("alarm cleared", "id", a.ID, "area", a.Area, "problem", a.Problem)
	}
	return nil
}

// sampler takes readings and keeps the alarm register while this replica
// holds the sampler lock.
func (s *Service) sampler(ctx context.Context) error {
	return store.Hold(ctx, s.deps.KV, Name+"/sampler", s.deps.Log, func(ctx context.Context, l *store.Lock) error {
		st := s.st.Fenced(l)
		every := s.deps.SampleEvery
		if every <= 0 {
			every = DefaultSampleEvery
		}
		var cpu cpuTimes
		cpu.read()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			r := s.reading(ctx, &cpu)
			now := s.deps.Now()
			_, err := st.Txn().Put(s.st.Key("health", fmt.Sprintf("%012d", now.Unix())), r).Commit(ctx)
			if err == nil {
				_, err = s.deps.KV.Delete(ctx, s.st.Key("health")+"/", clientv3.WithRange(s.st.Key("health", fmt.Sprintf("%012d", now.Add(-healthKeep).Unix()))))
			}
			if err != nil && ctx.Err() == nil {
				s.deps.Log.Warn("health reading not stored", "err", err)
			}
			if err := s.reconcileAlarms(ctx, st, s.findings(ctx, false)); err != nil && ctx.Err() == nil {
				s.deps.Log.Warn("alarm register not updated", "err", err)
			}
		}
	})
}

func (s *Service) listHealth(ctx context.Context, in *api.HealthFilter) (*api.HealthList, error) {
	from := s.deps.Now().Add(-time.Duration(in.Minutes) * time.Minute).Unix()
	resp, err := s.deps.KV.Get(ctx, s.st.Key("health", fmt.Sprintf("%012d", from)),
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.st.Key("health")+"/")))
	if err != nil {
		return nil, fmt.Errorf("reading health readings: %w", err)
	}
	every := s.deps.SampleEvery
	if every <= 0 {
		every = DefaultSampleEvery
	}
	out := &api.HealthList{Every: int(every / time.Second), Readings: []api.HealthReading{}}
	var broken []string
	for _, kv := range resp.Kvs {
		var r api.HealthReading
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			broken = append(broken, string(kv.Key))
			continue
		}
		out.Readings = append(out.Readings, r)
	}
	if len(broken) > 0 {
		return nil, &store.BrokenError{Keys: broken}
	}
	out.Count = len(out.Readings)
	return out, nil
}

// reading samples the host and the services.
func (s *Service) reading(ctx context.Context, cpu *cpuTimes) api.HealthReading {
	r := api.HealthReading{Time: s.deps.Now().Format(timeLayout), Services: map[string]string{}}
	r.CPUPercent = cpu.busySince()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			r.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	if total, avail := meminfo(); total > 0 {
		r.MemoryPercent = round1(100 * float64(total-avail) / float64(total))
	}
	if s.deps.StateDir != "" {
		var st unix.Statfs_t
		if unix.Statfs(s.deps.StateDir, &st) == nil && st.Blocks > 0 {
			r.DiskPercent = round1(100 * float64(st.Blocks-st.Bavail) / float64(st.Blocks))
		}
	}
	r.TemperatureC = temperature()
	names := s.expected()
	up := make([]bool, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() { defer wg.Done(); up[i] = bus.Up(s.deps.NC, n, time.Second) }()
	}
	wg.Wait()
	for i, n := range names {
		r.Services[n] = map[bool]string{true: "up", false: "down"}[up[i]]
	}
	return r
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

type cpuTimes struct{ busy, total uint64 }

func (c *cpuTimes) read() {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var total, idle uint64
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	c.busy, c.total = total-idle, total
}

// busySince is the busy share since the last call, in percent.
func (c *cpuTimes) busySince() float64 {
	prev := *c
	c.read()
	if c.total <= prev.total {
		return 0
	}
	return round1(100 * float64(c.busy-prev.busy) / float64(c.total-prev.total))
}

func meminfo() (total, avail uint64) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "MemTotal:":
			total = n
		case "MemAvailable:":
			avail = n
		}
	}
	return total, avail
}

// temperature is the hottest thermal zone in °C, nil without sensors.
func temperature() *float64 {
	zones, _ := filepath.Glob("/sys/class/thermal/thermal_zone*/temp")
	var best *float64
	for _, z := range zones {
		b, err := os.ReadFile(z)
		if err != nil {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		if err != nil {
			continue
		}
		c := n / 1000
		if best == nil || c > *best {
			best = &c
		}
	}
	return best
}
