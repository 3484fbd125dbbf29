package olt_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/services/olt"
	"routerd.dev/services/olt/sim"
)

// waitEvent returns the data of the next event of kind, skipping others.
func waitEvent(t *testing.T, sub *nats.Subscription, kind string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		var ev struct {
			Kind string
			Data map[string]any
		}
		_ = json.Unmarshal(m.Data, &ev)
		if ev.Kind == kind {
			return ev.Data
		}
	}
	t.Fatalf("no %s event", kind)
	return nil
}

func TestPollerEvents(t *testing.T) {
	r := start(t)
	r.register(t, "lab", nil)
	sub, err := r.env.NC.SubscribeSync("router.events.olt.>")
	if err != nil {
		t.Fatal(err)
	}
	// The ONT of the rig's autofind list, provisioned and online.
	envelope(t, r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 100}, nil), "vlan-add", 200)
	envelope(t, r.do(t, "POST", "/olt/ont-add", map[string]any{"port": simPort, "sn": simSN, "vlan": 100, "down_kbps": 10000, "up_kbps": 5000}, nil), "ont-add", 200)

	o := olt.New(olt.Deps{NC: r.env.NC, KV: r.env.KV, StateDir: r.state, PollEvery: 40 * time.Millisecond, BackupEvery: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// The first round learns; wait until a second has begun.
	base := r.sim.OLT(0).Received("display ont autofind")
	deadline := time.Now().Add(10 * time.Second)
	for r.sim.OLT(0).Received("display ont autofind") < base+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	r.sim.OLT(0).PlugONT(sim.AutofindONT{Port: "0/1/1", SN: "48575443DDEEFF01"})
	if d := waitEvent(t, sub, olt.EventONTFound); d["sn"] != "48575443DDEEFF01" || d["port"] != "0/1/1" || d["olt"] != "lab" {
		t.Errorf("ont.found %v", d)
	}
	r.sim.OLT(0).SetONTOnline(simSN, false)
	if d := waitEvent(t, sub, olt.EventONTOffline); d["sn"] != simSN || d["port"] != simPort || d["cause"] != "LOS" {
		t.Errorf("ont.offline %v", d)
	}
	r.sim.OLT(0).SetONTOnline(simSN, true)
	if d := waitEvent(t, sub, olt.EventONTOnline); d["sn"] != simSN {
		t.Errorf("ont.online %v", d)
	}
	r.sim.OLT(0).PowerOffONT(simSN)
	if d := waitEvent(t, sub, olt.EventONTOffline); d["cause"] != "dying-gasp" {
		t.Errorf("ont.offline after power-off %v", d)
	}
	// An OLT that does not answer: once unreachable, not once per round.
	r.register(t, "gone", map[string]any{"host": "127.0.0.1", "port": 1})
	if d := waitEvent(t, sub, olt.EventOLTUnreachable); d["olt"] != "gone" {
		t.Errorf("olt.unreachable %v", d)
	}
	time.Sleep(200 * time.Millisecond) // several rounds; what is tested is that they stay quiet
	for {
		m, err := sub.NextMsg(50 * time.Millisecond)
		if err != nil {
			break
		}
		var ev struct{ Kind string }
		_ = json.Unmarshal(m.Data, &ev)
		if ev.Kind == olt.EventOLTUnreachable {
			t.Error("olt.unreachable repeated")
		}
	}
}

// The optical thresholds are the service's configuration
// (olt_rx_min_dbm, olt_rx_max_dbm), not only the class B+ defaults: an
// ONT received at about -20 dBm is outside -12..-5 and reported with
// them.
func TestPollerOpticalThresholds(t *testing.T) {
	r := start(t)
	r.register(t, "lab", nil)
	sub, err := r.env.NC.SubscribeSync("router.events.olt.ont.optical")
	if err != nil {
		t.Fatal(err)
	}
	envelope(t, r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 100}, nil), "vlan-add", 200)
	envelope(t, r.do(t, "POST", "/olt/ont-add", map[string]any{"port": simPort, "sn": simSN, "vlan": 100, "down_kbps": 10000, "up_kbps": 5000}, nil), "ont-add", 200)
	o := olt.New(olt.Deps{NC: r.env.NC, KV: r.env.KV, StateDir: r.state, PollEvery: 40 * time.Millisecond, BackupEvery: -1,
		RxMinDBm: -12, RxMaxDBm: -5})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	d := waitEvent(t, sub, olt.EventONTOptical)
	if d["sn"] != simSN || d["min"] != -12.0 || d["max"] != -5.0 || d["rx_power_dbm"].(float64) > -12 {
		t.Errorf("ont.optical %v", d)
	}
}

// An OLT's record can carry its own thresholds (class C+ optics on one
// OLT, B+ on another): the poller uses them, and a pair without room
// between them is refused with 400 naming rx_min_dbm.
func TestRegistryOpticalThresholds(t *testing.T) {
	r := start(t)
	a := r.do(t, "POST", "/olts", map[string]any{"name": "bad", "host": "127.0.0.1", "user": "u", "pass": "p", "rx_min_dbm": -5}, nil)
	if a.status != 400 || !strings.Contains(a.raw, "rx_min_dbm") {
		t.Errorf("rx_min_dbm over the default max: %d %s", a.status, a.raw)
	}
	a = r.do(t, "POST", "/olts", map[string]any{"name": "bad", "host": "127.0.0.1", "user": "u", "pass": "p", "rx_max_dbm": 11}, nil)
	if a.status != 400 || !strings.Contains(a.raw, "rx_max_dbm") {
		t.Errorf("rx_max_dbm 11: %d %s", a.status, a.raw)
	}
	r.register(t, "lab", map[string]any{"rx_min_dbm": -12, "rx_max_dbm": -5})
	a = r.do(t, "GET", "/olts", nil, nil)
	if rec := a.body["olts"].([]any)[0].(map[string]any); rec["rx_min_dbm"] != -12.0 || rec["rx_max_dbm"] != -5.0 {
		t.Errorf("record %v", rec)
	}
	sub, err := r.env.NC.SubscribeSync("router.events.olt.ont.optical")
	if err != nil {
		t.Fatal(err)
	}
	envelope(t, r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 100}, nil), "vlan-add", 200)
	envelope(t, r.do(t, "POST", "/olt/ont-add", map[string]any{"port": simPort, "sn": simSN, "vlan": 100, "down_kbps": 10000, "up_kbps": 5000}, nil), "ont-add", 200)
	o := olt.New(olt.Deps{NC: r.env.NC, KV: r.env.KV, StateDir: r.state, PollEvery: 40 * time.Millisecond, BackupEvery: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	d := waitEvent(t, sub, olt.EventONTOptical)
	if d["olt"] != "lab" || d["min"] != -12.0 || d["max"] != -5.0 {
		t.Errorf("ont.optical %v", d)
	}
}
