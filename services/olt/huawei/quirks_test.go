package huawei_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei"
	"routerd.dev/services/olt/sim"
)

func TestLoginRefused(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := newRig(t, proto, sim.OLTConfig{}, func(c *huawei.Config) { c.Pass = "wrong" })
			_, err := r.drv.Info(ctxT(t), driver.Options{})
			var le *driver.LoginError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want a LoginError", err)
			}
			if got, want := driver.Code(err), 401; got != want {
				t.Errorf("code = %d, want %d", got, want)
			}
			var de *driver.Error
			if errors.As(err, &de) && proto == "telnet" {
				raw := fmt.Sprint(de.Transcript)
				if !strings.Contains(raw, "Username or password invalid") || strings.Contains(raw, "wrong") {
					t.Errorf("login transcript lacks the refusal or shows the password: %s", raw)
				}
			}
		})
	}
}

func TestTimeoutAttachesTranscript(t *testing.T) {
	r := newRig(t, "telnet", sim.OLTConfig{}, nil)
	ctx := ctxT(t)
	if _, err := r.drv.Boards(ctx, driver.Options{}); err != nil { // log in while the OLT is fast
		t.Fatal(err)
	}
	r.olt.SetLatency(5 * time.Second)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := r.drv.Boards(short, driver.Options{})
	if !errors.Is(err, driver.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	var de *driver.Error
	if !errors.As(err, &de) || len(de.Transcript) == 0 || de.Transcript[0].Sent != "display board 0" {
		t.Errorf("transcript = %+v", de)
	}
	if driver.Code(err) != 502 {
		t.Errorf("code = %d", driver.Code(err))
	}
}

func TestOLTErrorsCarryTheirText(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := newRig(t, proto, sim.OLTConfig{}, nil)
			ctx := ctxT(t)
			_, err := r.drv.Run(ctx, driver.RunArgs{Command: "display nonsense here"})
			var ce *driver.CommandError
			if !errors.As(err, &ce) || !strings.Contains(ce.Text, "% Unknown command") {
				t.Fatalf("unknown command: err = %v", err)
			}
			_, err = r.drv.Exec(ctx, driver.ExecArgs{Commands: []string{"frobnicate"}})
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Text, "% Unknown command") {
				t.Errorf("exec unknown: err = %v", err)
			}
			_, err = r.drv.Exec(ctx, driver.ExecArgs{Commands: []string{"vlan 5000 smart"}})
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Text, "% Parameter error") {
				t.Errorf("exec bad parameter: err = %v", err)
			}
			// A Failure: answer half-way through ont-add (the VLAN of the
			// service-port is missing): the ONT is rolled back.
			_, err = r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/0", SN: sn1, VLAN: 100})
			if !errors.As(err, &ce) || ce.Text != "Failure: The VLAN does not exist" {
				t.Errorf("ont-add without its VLAN: err = %v", err)
			}
			if onts := r.olt.ONTs(); len(onts) != 0 {
				t.Errorf("failed ont-add left %+v", onts)
			}
			if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 100}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/0", SN: sn1, VLAN: 100}); err != nil {
				t.Fatal(err)
			}
			_, err = r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/1", SN: sn1, VLAN: 100})
			var de *driver.Error
			if !errors.As(err, &ce) || ce.Text != "Failure: SN already exists" || !errors.As(err, &de) || len(de.Transcript) == 0 {
				t.Errorf("duplicate SN: err = %v", err)
			}
			if driver.Code(err) != 502 {
				t.Errorf("code = %d", driver.Code(err))
			}
			// The session that failed inside `interface gpon` must not leak
			// its mode into the next call.
			if _, err := r.drv.VLANs(ctx, driver.Options{}); err != nil {
				t.Errorf("after a failure: %v", err)
			}
		})
	}
}

// registerMany puts n ONTs on 0/1/0 directly through exec, cheaply.
func registerMany(t *testing.T, r *rig, n int) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := r.drv.ProfileAdd(ctx, driver.ProfileArgs{Kind: "line", ID: ptr(7), DBAProfileID: 1, VLAN: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.drv.ProfileAdd(ctx, driver.ProfileArgs{Kind: "service", ID: ptr(7), VLAN: 7}); err != nil {
		t.Fatal(err)
	}
	cmds := []string{"interface gpon 0/1"}
	for i := range n {
		cmds = append(cmds, fmt.Sprintf(`ont add 0 sn-auth "48575443%08X" omci ont-lineprofile-id 7 ont-srvprofile-id 7 desc "a-long-description-that-wraps-%03d"`, i, i))
	}
	if _, err := r.drv.Exec(ctx, driver.ExecArgs{Commands: append(cmds, "quit")}); err != nil {
		t.Fatal(err)
	}
}

func TestPagingAndAlarms(t *testing.T) {
	for _, c := range []struct {
		name           string
		paging, alarms bool
		wantRaw        string
		n              int
	}{
		{"paging", true, false, sim.MoreMarker, 40},
		{"no-paging", false, false, "", 40},
		{"alarms", true, true, "--- END", 40},
		{"large-paged", true, false, sim.MoreMarker, 250},
		{"large-unpaged", false, false, "", 250},
	} {
		for _, proto := range protocols {
			t.Run(c.name+"/"+proto, func(t *testing.T) {
				r := newRig(t, proto, sim.OLTConfig{NoPaging: true}, nil)
				registerMany(t, r, c.n)
				r.olt.SetPaging(c.paging)
				r.olt.SetAlarms(c.alarms)
				var tr driver.Transcript
				onus, err := r.drv.ONUs(driver.WithTranscript(ctxT(t), &tr), driver.PortArgs{Port: "0/1/0"})
				if err != nil {
					t.Fatal(err)
				}
				if onus.Count != c.n {
					t.Fatalf("count = %d, want %d", onus.Count, c.n)
				}
				for i, o := range onus.ONTs {
					if o.ID != i || o.Description != fmt.Sprintf("a-long-description-that-wraps-%03d", i) || o.SN != fmt.Sprintf("48575443%08X", i) {
						t.Errorf("ont %d = %+v", i, o)
					}
				}
				raw := tr.Exchanges[0].Reply
				if c.wantRaw != "" && !strings.Contains(raw, c.wantRaw) {
					t.Errorf("raw reply lacks %q", c.wantRaw)
				}
				if !c.paging && strings.Contains(raw, sim.MoreMarker) {
					t.Error("paged with paging off")
				}
			})
		}
	}
}

func TestInjectedAlarmMidOutput(t *testing.T) {
	r := newRig(t, "telnet", sim.OLTConfig{}, nil)
	ctx := ctxT(t)
	if _, err := r.drv.Boards(ctx, driver.Options{}); err != nil {
		t.Fatal(err)
	}
	r.olt.InjectAlarm("The ONT is offline")
	var tr driver.Transcript
	b, err := r.drv.Boards(driver.WithTranscript(ctx, &tr), driver.Options{})
	if err != nil || b.Count != 6 {
		t.Fatalf("boards = %+v, %v", b, err)
	}
	if !strings.Contains(tr.Exchanges[0].Reply, "ALARM NAME  : The ONT is offline") {
		t.Error("the alarm was not printed")
	}
}

func TestSharedOLTGuards(t *testing.T) {
	r := newRig(t, "telnet", sim.OLTConfig{Autofind: []sim.AutofindONT{{Port: "0/1/0", SN: sn1}}},
		func(c *huawei.Config) { c.SVLAN, c.Operator = 3000, true })
	ctx := ctxT(t)
	guard := func(err error, overridable bool) {
		t.Helper()
		var ge *driver.GuardError
		if !errors.As(err, &ge) || ge.Overridable != overridable {
			t.Errorf("err = %v, want a guard refusal (overridable %v)", err, overridable)
		}
	}
	_, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 200})
	guard(err, true)
	if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 200, Options: driver.Options{Force: true}}); err != nil {
		t.Errorf("forced vlan-add: %v", err)
	}
	v, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 3000, Attribute: "stacking"})
	if err != nil || !containsLine(v.Commands, `vlan desc 3000 description "s3000_vlan_3000"`) {
		t.Errorf("own S-VLAN: %+v, %v", v, err)
	}
	_, err = r.drv.Exec(ctx, driver.ExecArgs{Commands: []string{"display vlan all"}})
	guard(err, true)
	_, err = r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/0", SN: sn1, VLAN: 100, SVLAN: 2000})
	guard(err, true)

	add, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/0", SN: sn1, VLAN: 100, DownKbps: 1000, UpKbps: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.olt.RunningConfig(), `name "s3000_1000k"`) {
		t.Error("traffic table not named with the s<svlan> prefix")
	}
	ref := driver.ONTRefArgs{Port: "0/1/0", ONTID: add.ONTID}
	if _, err := r.drv.ONTDeactivate(ctx, ref); err != nil {
		t.Errorf("own ONT: %v", err)
	}
	// Another operator's flow on the same ONT: refused, force or not.
	r.olt.AddServicePort(2000, "0/1/0", add.ONTID, 1, 55)
	for _, force := range []bool{false, true} {
		ref.Force = force
		_, err = r.drv.ONTDel(ctx, ref)
		guard(err, false)
		_, err = r.drv.ONTReboot(ctx, ref)
		guard(err, false)
	}
	// ...unless the caller names that S-VLAN as also its own.
	ref.ExpectSVLAN = 2000
	if _, err := r.drv.ONTActivate(ctx, ref); err != nil {
		t.Errorf("expect_svlan: %v", err)
	}

	// An ONT with no service-port at all needs force.
	if _, err := r.drv.Exec(ctx, driver.ExecArgs{Options: driver.Options{Force: true}, Commands: []string{
		"interface gpon 0/1", `ont add 1 5 sn-auth "48575443AABBCC09" omci ont-lineprofile-id 100 ont-srvprofile-id 100`, "quit"}}); err != nil {
		t.Fatal(err)
	}
	bare := driver.ONTRefArgs{Port: "0/1/1", ONTID: 5}
	_, err = r.drv.ONTDel(ctx, bare)
	guard(err, true)
	bare.Force = true
	if _, err := r.drv.ONTDel(ctx, bare); err != nil {
		t.Errorf("forced ont-del of a bare ONT: %v", err)
	}
}

func TestWriteNotResentAfterLinkLoss(t *testing.T) {
	r := newRig(t, "telnet", sim.OLTConfig{}, func(c *huawei.Config) { c.Fallback = "ssh" })
	ctx := ctxT(t)
	if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 100}); err != nil {
		t.Fatal(err)
	}
	r.olt.DropAfter("ont add")
	_, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/0", SN: sn1, VLAN: 100})
	if err == nil {
		t.Fatal("ont-add succeeded over a dropped link")
	}
	if got := r.olt.Received("ont add"); got != 1 {
		t.Errorf("ont add received %d times, want exactly 1", got)
	}
	// The driver recovers for the next call with a fresh session.
	if _, err := r.drv.Boards(ctx, driver.Options{}); err != nil {
		t.Errorf("after the drop: %v", err)
	}
}

func TestFirmwareVariantsOfONTAdd(t *testing.T) {
	for _, m := range []sim.Model{sim.MA5800, sim.MA5608T, sim.MA5683T} {
		t.Run(string(m), func(t *testing.T) {
			r := newRig(t, "ssh", sim.OLTConfig{Model: m}, nil)
			ctx := ctxT(t)
			if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 100}); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				add, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/2/7", SN: fmt.Sprintf("4857544300000%03d", i), VLAN: 100})
				if err != nil {
					t.Fatal(err)
				}
				if add.ONTID != i {
					t.Errorf("ont_id = %d, want %d", add.ONTID, i)
				}
			}
		})
	}
}

func TestWritesSerialisedReadsAlongside(t *testing.T) {
	r := newRig(t, "telnet", sim.OLTConfig{}, func(c *huawei.Config) { c.MaxIdle = 4 })
	ctx := ctxT(t)
	if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 100}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/3", SN: fmt.Sprintf("48575443000001%02d", i), VLAN: 100})
			errs <- err
		}()
		go func() {
			defer wg.Done()
			_, err := r.drv.ServicePorts(ctx, driver.Options{})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	seen := map[int]bool{}
	for _, o := range r.olt.ONTs() {
		if seen[o.ID] {
			t.Errorf("ONT id %d given twice", o.ID)
		}
		seen[o.ID] = true
		if len(o.ServicePorts) != 1 {
			t.Errorf("ONT %d has %d service-ports", o.ID, len(o.ServicePorts))
		}
	}
	if len(seen) != 8 {
		t.Errorf("%d ONTs registered, want 8", len(seen))
	}
}

// An alarm printed while a pooled session sits at its prompt, with the
// prompt reprinted after it, must not be taken for the answer of the next
// command.
func TestAlarmWhileIdle(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := newRig(t, proto, sim.OLTConfig{}, nil)
			ctx := ctxT(t)
			if _, err := r.drv.Boards(ctx, driver.Options{}); err != nil {
				t.Fatal(err)
			}
			// AsyncAlarm has written the alarm before it returns, so it is
			// ahead of anything the next command gets.
			r.olt.AsyncAlarm("The ONT is offline")
			var tr driver.Transcript
			b, err := r.drv.Boards(driver.WithTranscript(ctx, &tr), driver.Options{})
			if err != nil || b.Count != 6 {
				t.Fatalf("boards after an idle alarm = %+v, %v", b, err)
			}
			v, err := r.drv.VLANs(driver.WithTranscript(ctx, &tr), driver.Options{})
			if err != nil || v.Count != 1 {
				t.Errorf("next read = %+v, %v", v, err)
			}
			found := false
			for _, e := range tr.Exchanges {
				found = found || strings.Contains(e.Reply, "The ONT is offline")
			}
			if !found {
				t.Error("the idle alarm is not in the transcript")
			}
		})
	}
}

func TestSSHKeyboardInteractive(t *testing.T) {
	r := newRig(t, "ssh", sim.OLTConfig{KeyboardInteractive: true}, nil)
	if _, err := r.drv.Boards(ctxT(t), driver.Options{}); err != nil {
		t.Fatal(err)
	}
	bad := newRig(t, "ssh", sim.OLTConfig{KeyboardInteractive: true}, func(c *huawei.Config) { c.Pass = "nope" })
	_, err := bad.drv.Boards(ctxT(t), driver.Options{})
	if driver.Code(err) != 401 {
		t.Errorf("wrong password by keyboard-interactive: err = %v", err)
	}
}

// Sessions the OLT closed while they sat in the pool are replaced before
// anything is sent, so a write still goes out exactly once.
func TestPooledSessionClosedByOLT(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := newRig(t, proto, sim.OLTConfig{}, nil)
			ctx := ctxT(t)
			if _, err := r.drv.Boards(ctx, driver.Options{}); err != nil {
				t.Fatal(err)
			}
			r.olt.DropSessions()
			// Go on once the driver's reader has seen the close, as it would
			// have by the time a real OLT's idle logout matters.
			waitFor(t, 2*time.Second, "the pooled session's reader to see the close", func() bool {
				return r.olt.Sessions() == 0 && huawei.IdleSessionsClosed(r.drv)
			})
			if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 77}); err != nil {
				t.Fatalf("vlan-add after the OLT closed the pooled session: %v", err)
			}
			if got := r.olt.Received("vlan 77"); got != 1 {
				t.Errorf("vlan 77 received %d times", got)
			}
		})
	}
}

func TestUnpluggedONTStates(t *testing.T) {
	r := newRig(t, "telnet", sim.OLTConfig{Autofind: []sim.AutofindONT{{Port: "0/1/0", SN: sn1}}}, nil)
	add := provision(t, r)
	ctx := ctxT(t)
	r.olt.SetONTOnline(sn1, false)
	onus, err := r.drv.ONUs(ctx, driver.PortArgs{Port: "0/1/0"})
	if err != nil {
		t.Fatal(err)
	}
	o := onus.ONTs[0]
	if o.RunState != "offline" || o.ConfigState != "initial" || o.MatchState != "initial" {
		t.Errorf("unplugged ONT states = %s/%s/%s", o.RunState, o.ConfigState, o.MatchState)
	}
	opt, err := r.drv.ONTOptical(ctx, driver.ONTOpticalArgs{Port: "0/1/0", ONTID: &add.ONTID})
	var ce *driver.CommandError
	if !errors.As(err, &ce) || ce.Text != "Failure: The ONT is not online" {
		t.Errorf("optical of an offline ONT = %+v, %v", opt, err)
	}
	sps, err := r.drv.ServicePorts(ctx, driver.Options{})
	if err != nil || sps.ServicePorts[0].State != "down" {
		t.Errorf("service-port of an offline ONT = %+v, %v", sps, err)
	}
}
