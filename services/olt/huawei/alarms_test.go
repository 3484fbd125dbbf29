package huawei_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei"
	"routerd.dev/services/olt/sim"
)

// alarmRig is a rig on a fixed clock whose driver hands every alarm it
// took out of a result to the returned list.
func alarmRig(t *testing.T, proto string, oc sim.OLTConfig) (*rig, func() []string) {
	t.Helper()
	clock := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	srv, err := sim.Start(context.Background(), sim.Config{OLTs: []sim.OLTConfig{oc}, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.TelnetAddr()
	if proto == "ssh" {
		addr = srv.SSHAddr()
	}
	host, port := hostPort(t, addr)
	var mu sync.Mutex
	var alarms []string
	drv, err := huawei.New(huawei.Config{Host: host, Port: port, Protocol: proto, User: "root", Pass: "admin"},
		huawei.Deps{Alarm: func(_, a string) { mu.Lock(); alarms = append(alarms, a); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return &rig{srv: srv, olt: srv.OLT(0), drv: drv}, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), alarms...)
	}
}

// Asynchronous alarms as real OLTs print them (numbered header with a
// date, the alarm line broken over two lines, indented continuations, end
// marker), at every moment they can come: in the middle of an output, at
// the prompt between commands, before the echo of a command (the prompt
// reprinted first), while a command is being echoed (the prompt and the
// half-typed line reprinted after it), several kilobytes long. Every read
// answers as without the alarm, no later answer is shifted, and each
// alarm is reported once, whole.
func TestAlarmsAtEveryMoment(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r, alarms := alarmRig(t, proto, sim.OLTConfig{Name: "OLT1"})
			ctx := ctxT(t)
			if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 100, Uplinks: []string{"0/3/0"}}); err != nil {
				t.Fatal(err)
			}
			for i, d := range []string{"flat 7 building A entrance 123 west wing", "x"} {
				sn := fmt.Sprintf("48575443CCDD%04X", i)
				r.olt.PlugONT(sim.AutofindONT{Port: "0/1/0", SN: sn})
				if _, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/0", SN: sn, VLAN: 100, Description: d,
					Plan: &driver.Plan{Name: "p", DownKbps: 10000, UpKbps: 10000}}); err != nil {
					t.Fatal(err)
				}
			}
			o := driver.Options{}
			reads := []struct {
				name string
				do   func() (any, error)
			}{
				{"info", func() (any, error) { return r.drv.Info(ctx, o) }},
				{"config", func() (any, error) { return r.drv.Config(ctx, o) }},
				{"run", func() (any, error) { return r.drv.Run(ctx, driver.RunArgs{Command: "display board 0"}) }},
				{"onus", func() (any, error) { return r.drv.ONUs(ctx, driver.PortArgs{Port: "0/1/0"}) }},
				{"vlans", func() (any, error) { return r.drv.VLANs(ctx, o) }},
				{"boards", func() (any, error) { return r.drv.Boards(ctx, o) }},
			}
			want := map[string]any{}
			for _, rd := range reads {
				v, err := rd.do()
				if err != nil {
					t.Fatal(rd.name, err)
				}
				want[rd.name] = v
			}
			if n := len(alarms()); n != 0 {
				t.Fatalf("%d alarms before any was printed", n)
			}
			moments := []struct {
				name string
				arm  func(name string)
				n    int // alarms printed per read
			}{
				{"mid-output", func(n string) { r.olt.InjectAlarm(n) }, 1},
				{"at the prompt", func(n string) { r.olt.AsyncAlarm(n) }, 1},
				{"before the echo", func(n string) { r.olt.TypingAlarm(n, 0) }, 1},
				{"while typing", func(n string) { r.olt.TypingAlarm(n, 9) }, 1},
				{"long, while typing", func(n string) { r.olt.SetLongAlarms(true); r.olt.TypingAlarm(n, 5) }, 1},
				{"everywhere at once", func(n string) {
					r.olt.SetLongAlarms(false)
					r.olt.AsyncAlarm(n + " 1")
					r.olt.TypingAlarm(n+" 2", 3)
					r.olt.InjectAlarm(n + " 3")
				}, 3},
			}
			for _, m := range moments {
				before := len(alarms())
				for _, rd := range reads {
					m.arm("The ONT LOS " + m.name + " " + rd.name)
					got, err := rd.do()
					if err != nil {
						t.Fatalf("%s, %s: %v", m.name, rd.name, err)
					}
					if diff := cmp.Diff(want[rd.name], got); diff != "" {
						t.Errorf("%s, %s (-want +got):\n%s", m.name, rd.name, diff)
					}
				}
				got := alarms()[before:]
				if len(got) != m.n*len(reads) {
					t.Errorf("%s: %d alarms reported, want %d: %q", m.name, len(got), m.n*len(reads), got)
				}
				for _, a := range got {
					if !strings.Contains(a, "ALARM NAME : The ONT LOS "+m.name) || !strings.Contains(a, "PARAMETERS : FrameID: 0, SlotID: 1, PortID: 0") ||
						strings.Contains(a, "END") || strings.Contains(a, "#") {
						t.Errorf("%s: alarm reported as %q", m.name, a)
					}
				}
			}
		})
	}
}

// Alarms printed while the commands of a write are typed (before their
// echo or in its middle) neither end a reply early nor shift the next
// one: the OLT receives exactly the lines it receives without alarms, one
// command per line, and the ONT is made as asked.
func TestAlarmsDuringWrites(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			var logs [2][]string
			for i, withAlarms := range []bool{false, true} {
				r, alarms := alarmRig(t, proto, sim.OLTConfig{Name: "OLT1", LogCommands: true, Autofind: []sim.AutofindONT{{Port: "0/1/0", SN: sn1}}})
				ctx := ctxT(t)
				if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 100, Uplinks: []string{"0/3/0"}}); err != nil {
					t.Fatal(err)
				}
				start := len(r.olt.CommandLog())
				if withAlarms {
					r.olt.SetLongAlarms(true)
					for k := range 12 {
						r.olt.TypingAlarm(fmt.Sprintf("The ONT LOS %d", k), []int{0, 4, 11, 30, 200}[k%5])
					}
				}
				add, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/0", SN: sn1, VLAN: 100, Description: "flat 7 building A entrance 123 west wing",
					Plan: &driver.Plan{Name: "p", DownKbps: 10000, UpKbps: 10000}})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range r.olt.CommandLog()[start:] {
					logs[i] = append(logs[i], c.Line)
				}
				onus, err := r.drv.ONUs(ctx, driver.PortArgs{Port: "0/1/0"})
				if err != nil || onus.Count != 1 || onus.ONTs[0].Description != "flat 7 building A entrance 123 west wing" || onus.ONTs[0].ID != add.ONTID {
					t.Errorf("onus = %+v, %v", onus, err)
				}
				sp, err := r.drv.ServicePorts(ctx, driver.Options{})
				if err != nil || len(sp.ServicePorts) != 1 {
					t.Errorf("service-ports = %+v, %v", sp, err)
				}
				if withAlarms && len(alarms()) != 12 {
					t.Errorf("%d alarms reported, want 12", len(alarms()))
				}
			}
			if diff := cmp.Diff(logs[0], logs[1]); diff != "" {
				t.Errorf("lines the OLT received with alarms (-without +with):\n%s", diff)
			}
		})
	}
}

// An alarm printed before or during the echo of the first commands of a
// session (enable, config: before the OLT was seen echoing) does not end
// their replies early, which would leave the session one reply behind in
// the wrong mode.
func TestAlarmsWhileLoggingIn(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			for _, at := range []int{0, 2, 4} {
				r, alarms := alarmRig(t, proto, sim.OLTConfig{Name: "OLT1", Latency: 30 * time.Millisecond})
				r.olt.SetLongAlarms(at == 4)
				r.olt.TypingAlarm("The ONT LOS 1", at)
				r.olt.TypingAlarm("The ONT LOS 2", at)
				// And one before the echo of the first command of the
				// operation, once logged in.
				r.olt.TypingAlarm("The ONT LOS 3", 0)
				b, err := r.drv.Boards(ctxT(t), driver.Options{})
				if err != nil || b.Count != 6 {
					t.Fatalf("alarm at %d: boards = %+v, %v", at, b, err)
				}
				r.olt.TypingAlarm("The ONT LOS 4", 0)
				v, err := r.drv.VLANs(ctxT(t), driver.Options{})
				if err != nil || v.Count != 1 {
					t.Fatalf("alarm at %d: vlans = %+v, %v", at, v, err)
				}
				if n := len(alarms()); n != 4 {
					t.Errorf("alarm at %d: %d alarms reported, want 4", at, n)
				}
			}
		})
	}
}

// An alarm printed with the post-login banner is reported once and the
// session works.
func TestAlarmInTheBanner(t *testing.T) {
	raw, err := os.ReadFile("parse/testdata/huawei_alarm_while_typing__netmiko-issue-3559.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	block := strings.Join(lines[2:23], "\n")
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r, alarms := alarmRig(t, proto, sim.OLTConfig{Name: "OLT1", Banner: block})
			b, err := r.drv.Boards(ctxT(t), driver.Options{})
			if err != nil || b.Count != 6 {
				t.Fatalf("boards = %+v, %v", b, err)
			}
			if got := alarms(); len(got) != 1 || !strings.Contains(got[0], "LOSi/LOBi") {
				t.Errorf("alarms %q", got)
			}
		})
	}
}
