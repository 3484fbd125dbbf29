package huawei_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/sim"
)

const sn1 = "48575443AABBCC01"

// provision makes VLAN 100 on uplink 0/3/0 and registers sn1 on 0/1/0
// with a 100/50 Mbit/s plan.
func provision(t *testing.T, r *rig) *driver.ONTAddResult {
	t.Helper()
	ctx := ctxT(t)
	if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 100, Uplinks: []string{"0/3/0"}}); err != nil {
		t.Fatal(err)
	}
	add, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/1/0", SN: sn1, VLAN: 100, Description: "client-1",
		Plan: &driver.Plan{Name: "p100", DownKbps: 100000, UpKbps: 50000}})
	if err != nil {
		t.Fatal(err)
	}
	return add
}

func TestReadOperations(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := newRig(t, proto, sim.OLTConfig{Name: "OLT1", Autofind: []sim.AutofindONT{
				{Port: "0/1/0", SN: sn1}, {Port: "0/2/5", SN: "48575443DDEEFF02"}}}, nil)
			ctx := ctxT(t)
			o := driver.Options{}
			add := provision(t, r)
			if got, want := add.ONTID, 0; got != want {
				t.Errorf("ont_id = %d, want %d", got, want)
			}

			info, err := r.drv.Info(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if info.Product != "MA5800-X7" || info.Sysname != "OLT1" || info.Version == "" || len(info.Boards) != 6 || info.Time == "" || info.NTP == "" {
				t.Errorf("info = %+v", info)
			}

			af, err := r.drv.Autofind(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"0/2/5 48575443DDEEFF02"}, func() (s []string) {
				for _, a := range af.ONTs {
					s = append(s, a.Port+" "+a.SN)
				}
				return
			}()); diff != "" || af.Count != 1 {
				t.Errorf("autofind (-want +got):\n%s", diff)
			}

			for _, port := range []string{"", "0/1/0"} {
				onus, err := r.drv.ONUs(ctx, driver.PortArgs{Port: port})
				if err != nil {
					t.Fatal(err)
				}
				want := []driver.ONT{{Port: "0/1/0", ID: 0, SN: sn1, Control: "active", RunState: "online", ConfigState: "normal",
					MatchState: "match", Description: "client-1"}}
				if diff := cmp.Diff(want, onus.ONTs); diff != "" {
					t.Errorf("onus(%q) (-want +got):\n%s", port, diff)
				}
			}

			vl, err := r.drv.VLANs(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if vl.Count != 2 || !cmp.Equal(vl.UplinkPorts["0/3/0"], driver.UplinkPort{VLANs: []int{100}, Native: 1}) {
				t.Errorf("vlans = %+v", vl)
			}

			sps, err := r.drv.ServicePorts(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if sps.Count != 1 || sps.ServicePorts[0].VLAN != 100 || sps.ServicePorts[0].PON != "0/1/0" || sps.ServicePorts[0].State != "up" {
				t.Errorf("serviceports = %+v", sps)
			}

			pr, err := r.drv.Profiles(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			names := func(ps []driver.Profile) (s []string) {
				for _, p := range ps {
					s = append(s, p.Name)
				}
				return
			}
			if diff := cmp.Diff([]string{"line-profile_default_0", "router_line_100"}, names(pr.Line)); diff != "" {
				t.Errorf("line profiles (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"srv-profile_default_0", "router_srv_100"}, names(pr.Service)); diff != "" {
				t.Errorf("service profiles (-want +got):\n%s", diff)
			}
			rates := map[int]bool{}
			for _, tt := range pr.TrafficTables {
				rates[tt.CIR] = true
			}
			if !rates[110000] || !rates[55000] || len(pr.DBA) != 4 {
				t.Errorf("profiles: headroom tables 110000/55000 missing or DBA wrong: %+v", pr)
			}

			cfg, err := r.drv.Config(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(cfg.Config, `ont add 0 0 sn-auth "48575443AABBCC01"`) || cfg.Lines < 20 {
				t.Errorf("config lacks the ONT: %d lines", cfg.Lines)
			}

			run, err := r.drv.Run(ctx, driver.RunArgs{Command: "display sysuptime"})
			if err != nil || !strings.Contains(run.Output, "System up time") {
				t.Errorf("run = %+v, %v", run, err)
			}
			if _, err := r.drv.Run(ctx, driver.RunArgs{Command: "undo vlan 100"}); err == nil {
				t.Error("run accepted a non-display command")
			}

			au, err := r.drv.Audit(ctx, driver.AuditArgs{SVLAN: 100, Ports: []string{"0/1/0"}})
			if err != nil {
				t.Fatal(err)
			}
			if !au.Exists || au.Type != "smart" || len(au.Uplinks) != 1 || au.Uplinks[0].State != "online" ||
				len(au.ServicePorts) != 1 || len(au.Rates) != 2 || len(au.ONTs) != 1 || au.PlanPrefix != "router" {
				t.Errorf("audit = %+v", au)
			}

			bo, err := r.drv.Boards(ctx, o)
			if err != nil || bo.Count != 6 {
				t.Errorf("boards = %+v, %v", bo, err)
			}
			pp, err := r.drv.PONPorts(ctx, driver.PortArgs{})
			if err != nil || pp.Count != 32 {
				t.Errorf("pon-ports count = %d, %v", pp.Count, err)
			}
			pp, err = r.drv.PONPorts(ctx, driver.PortArgs{Port: "0/2/3"})
			if err != nil || pp.Count != 1 || pp.Ports[0].Port != "0/2/3" {
				t.Errorf("pon-ports 0/2/3 = %+v, %v", pp, err)
			}
			po, err := r.drv.PortOptical(ctx, driver.PortArgs{Port: "0/1/0"})
			if err != nil || po.Count != 1 || po.Ports[0].TxPowerDBm == 0 || po.Ports[0].Module != "Online" {
				t.Errorf("port-optical = %+v, %v", po, err)
			}

			id := 0
			for _, c := range []struct {
				name string
				args driver.CountersArgs
				want int
				key  string
			}{
				{"port", driver.CountersArgs{Port: "0/1/0"}, 1, "received_bytes"},
				{"ont", driver.CountersArgs{Port: "0/1/0", ONTID: &id}, 1, "downstream_bytes_sent"},
				{"onts", driver.CountersArgs{ONTs: true}, 1, "upstream_frames_received"},
				{"uplinks", driver.CountersArgs{Port: "0/1/0", Uplinks: true}, 9, "sent_bytes"},
			} {
				cs, err := r.drv.Counters(ctx, c.args)
				if err != nil {
					t.Fatalf("counters %s: %v", c.name, err)
				}
				if cs.Count != c.want || cs.Counters[0].Values[c.key] == 0 && cs.Counters[len(cs.Counters)-1].Values[c.key] == 0 {
					t.Errorf("counters %s = %+v", c.name, cs)
				}
			}

			oo, err := r.drv.ONTOptical(ctx, driver.ONTOpticalArgs{Port: "0/1/0"})
			if err != nil || len(oo.ONTs) != 1 || oo.ONTs[0].RxPowerDBm == nil {
				t.Errorf("ont-optical all = %+v, %v", oo, err)
			}
			oo, err = r.drv.ONTOptical(ctx, driver.ONTOpticalArgs{Port: "0/1/0", ONTID: &id})
			if err != nil || len(oo.ONTs) != 1 || oo.ONTs[0].VoltageV == nil || *oo.ONTs[0].RxPowerDBm > -10 {
				t.Errorf("ont-optical one = %+v, %v", oo, err)
			}
		})
	}
}
