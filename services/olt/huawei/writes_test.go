package huawei_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei"
	"routerd.dev/services/olt/sim"
)

func TestWriteOperations(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := newRig(t, proto, sim.OLTConfig{Name: "OLT1", Autofind: []sim.AutofindONT{{Port: "0/1/0", SN: sn1}}},
				func(c *huawei.Config) { c.IPTVVLAN = 900 })
			ctx := ctxT(t)
			must := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			_, err := r.drv.Init(ctx, driver.InitArgs{SVLAN: 3000, Uplinks: []string{"0/3/0", "0/4/0"}})
			must("init", err)
			// A second init finds everything in place and changes nothing.
			again, err := r.drv.Init(ctx, driver.InitArgs{SVLAN: 3000, Uplinks: []string{"0/3/0", "0/4/0"}})
			must("init again", err)
			if len(again.Commands) != 0 {
				t.Errorf("second init sent %q", again.Commands)
			}
			_, err = r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 900, Description: "iptv", Uplinks: []string{"0/3/0"}})
			must("vlan-add 900", err)
			_, err = r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 200, Type: "standard", Attribute: "qinq"})
			must("vlan-add 200", err)
			pv, err := r.drv.PortVLAN(ctx, driver.PortVLANArgs{VLAN: 200, Port: "0/3/1"})
			must("port-vlan", err)
			if !pv.Tagged {
				t.Error("port-vlan: not tagged")
			}
			_, err = r.drv.PortVLAN(ctx, driver.PortVLANArgs{VLAN: 200, Port: "0/3/1", Remove: true})
			must("port-vlan remove", err)
			_, err = r.drv.VLANDel(ctx, driver.VLANDelArgs{VLAN: 200})
			must("vlan-del", err)

			ps, err := r.drv.PlanSync(ctx, driver.PlanSyncArgs{Plans: []driver.Plan{{Name: "p100", DownKbps: 100000, UpKbps: 20000},
				{Name: "p100b", DownKbps: 100000, UpKbps: 20000}}})
			must("plan-sync", err)
			if ps.Plans[0].Created != 2 || ps.Plans[1].Created != 0 || ps.Plans[0].DownIndex != ps.Plans[1].DownIndex {
				t.Errorf("plan-sync = %+v", ps.Plans)
			}

			add, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/0", SN: sn1, VLAN: 100, UserVLAN: 10, SVLAN: 3000, IPTV: true,
				ETHPorts: 2, Plan: &driver.Plan{Name: "p100", DownKbps: 100000, UpKbps: 20000}})
			must("ont-add", err)
			if diff := cmp.Diff(driver.ONTAddResult{WriteResult: add.WriteResult, Port: "0/1/0", SN: sn1, ONTID: 0, VLAN: 3000,
				CVLAN: 100, UserVLAN: 10}, *add); diff != "" {
				t.Errorf("ont-add (-want +got):\n%s", diff)
			}
			cfg := r.olt.RunningConfig()
			for _, want := range []string{
				"service-port 0 vlan 3000 gpon 0/1/0 ont 0 gemport 1 multi-service user-vlan 10 tag-transform translate-and-add inner-vlan 100 inbound traffic-table index 11 outbound traffic-table index 10",
				"service-port 1 vlan 900 gpon 0/1/0 ont 0 gemport 1 multi-service user-vlan 900 tag-transform translate",
				"ont port native-vlan 0 0 eth 2 vlan 10",
				"igmp user add service-port 1 no-auth",
				"multicast-vlan 900\n igmp multicast-vlan member service-port 1",
				"vlan attrib 3000 stacking",
				"port vlan 3000 0/4 0",
			} {
				if !strings.Contains(cfg, want) {
					t.Errorf("running config lacks %q", want)
				}
			}

			ref := driver.ONTRefArgs{Port: "0/1/0", ONTID: 0}
			_, err = r.drv.ONTDesc(ctx, driver.ONTDescArgs{Port: "0/1/0", ONTID: 0, Description: "new label"})
			must("ont-desc", err)
			de, err := r.drv.ONTDeactivate(ctx, ref)
			must("ont-deactivate", err)
			if onts := r.olt.ONTs(); de.Active || onts[0].Active || onts[0].Description != "new label" {
				t.Errorf("after deactivate: %+v", onts)
			}
			ac, err := r.drv.ONTActivate(ctx, ref)
			must("ont-activate", err)
			if !ac.Active || !r.olt.ONTs()[0].Active {
				t.Error("ont-activate left the ONT inactive")
			}
			rb, err := r.drv.ONTReboot(ctx, ref)
			must("ont-reboot", err)
			if !rb.Rebooted || r.olt.Received("ont reset") != 1 {
				t.Errorf("ont-reboot = %+v", rb)
			}
			rp, err := r.drv.ONTReplan(ctx, driver.ONTReplanArgs{Port: "0/1/0", ONTID: 0, Plan: "p200", DownKbps: 200000,
				UpKbps: 50000, VLAN: 100, UserVLAN: 10, SVLAN: 3000})
			must("ont-replan", err)
			if diff := cmp.Diff([]int{0}, rp.ServicePorts); diff != "" || rp.Car.In == 10 {
				t.Errorf("ont-replan = %+v %s", rp, diff)
			}
			if !strings.Contains(r.olt.RunningConfig(), "service-port 0 vlan 3000") {
				t.Error("replan lost the service-port index")
			}

			profiles := []driver.ProfileArgs{
				{Kind: "dba", ID: ptr(20), Kbps: 50000},
				{Kind: "line", ID: ptr(500), DBAProfileID: 20, VLAN: 500},
				{Kind: "service", ID: ptr(500), VLAN: 500, ETHPorts: 4},
				{Kind: "traffic", Kbps: 7000},
			}
			for i, p := range profiles {
				res, err := r.drv.ProfileAdd(ctx, p)
				must("profile-add "+p.Kind, err)
				profiles[i].ID = &res.ID
			}
			if cfg := r.olt.RunningConfig(); !strings.Contains(cfg, `ont-lineprofile gpon profile-id 500 profile-name "router_line_500"`) ||
				!strings.Contains(cfg, `name "router_7000k" cir 7000`) {
				t.Errorf("profiles missing from the running config:\n%s", cfg)
			}
			for i := len(profiles) - 1; i >= 0; i-- {
				_, err := r.drv.ProfileDel(ctx, profiles[i])
				must("profile-del "+profiles[i].Kind, err)
			}

			_, err = r.drv.NTP(ctx, driver.NTPArgs{Servers: []string{"192.0.2.1"}})
			must("ntp", err)
			_, err = r.drv.Sysname(ctx, driver.SysnameArgs{Name: "OLT-RENAMED"})
			must("sysname", err)
			info, err := r.drv.Info(ctx, driver.Options{})
			must("info", err)
			if info.Sysname != "OLT-RENAMED" || info.NTP != "synchronized" {
				t.Errorf("info after ntp/sysname = %s %s", info.Sysname, info.NTP)
			}
			ex, err := r.drv.Exec(ctx, driver.ExecArgs{Commands: []string{"vlan 300 smart", "display vlan all"}})
			must("exec", err)
			if len(ex.Outputs) != 2 || !strings.Contains(ex.Outputs[1].Output, " 300 ") {
				t.Errorf("exec = %+v", ex.Outputs)
			}
			sv, err := r.drv.Save(ctx, driver.Options{})
			must("save", err)
			if !strings.Contains(sv.Output, "saved completely") {
				t.Errorf("save output %q", sv.Output)
			}

			del, err := r.drv.ONTDel(ctx, ref)
			must("ont-del", err)
			if diff := cmp.Diff([]int{0, 1}, del.ServicePortsRemoved); diff != "" || !del.Deleted || len(r.olt.ONTs()) != 0 {
				t.Errorf("ont-del (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr(i int) *int { return &i }

func TestDryRunSendsNoChange(t *testing.T) {
	r := newRig(t, "telnet", sim.OLTConfig{}, nil)
	ctx := ctxT(t)
	res, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Options: driver.Options{DryRun: true}, Port: "0/1/0", SN: sn1, VLAN: 100,
		DownKbps: 10000, UpKbps: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || len(res.Commands) < 5 {
		t.Fatalf("plan = %+v", res.WriteResult)
	}
	want := `ont add 0 sn-auth "48575443AABBCC01" omci ont-lineprofile-id 100 ont-srvprofile-id 100`
	if !containsLine(res.Commands, want) || !containsLine(res.Commands, "ont port native-vlan 0 <ont-id> eth 1 vlan 100 priority 0") {
		t.Errorf("plan lacks the ont add: %q", res.Commands)
	}
	for _, prefix := range []string{"ont add", "service-port", "traffic table", "ont-lineprofile", "dba-profile add", "interface"} {
		if n := r.olt.Received(prefix); n != 0 {
			t.Errorf("dry run sent %d %q commands", n, prefix)
		}
	}
	if _, err := r.drv.Save(ctx, driver.Options{DryRun: true}); err == nil || r.olt.Received("save") != 0 {
		t.Errorf("save under dry_run: err = %v, sent %d", err, r.olt.Received("save"))
	}
	v, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{Options: driver.Options{DryRun: true}, VLAN: 55, Uplinks: []string{"0/3/0"}})
	if err != nil || len(v.Commands) != 3 || r.olt.Received("vlan") != 0 {
		t.Errorf("vlan-add dry run = %+v, %v", v, err)
	}
}

func containsLine(ls []string, want string) bool {
	for _, l := range ls {
		if l == want {
			return true
		}
	}
	return false
}
