package sim_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/services/olt/sim"
)

// capture returns the lines of a capture of the parser's testdata, with
// trailing blanks removed.
func capture(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "huawei", "parse", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n") {
		out = append(out, strings.TrimRight(l, " "))
	}
	return out
}

// starts returns the columns where the whitespace-separated fields of a
// line begin.
func starts(l string) []int {
	var out []int
	for i := range l {
		if l[i] != ' ' && (i == 0 || l[i-1] == ' ') {
			out = append(out, i)
		}
	}
	return out
}

// TestLayoutsMatchCaptures checks the simulator prints what a real OLT
// prints: header and rule lines verbatim, data rows either verbatim (when
// the data is the same) or with every field in the same column.
func TestLayoutsMatchCaptures(t *testing.T) {
	srv, err := sim.Start(context.Background(), sim.Config{OLTs: []sim.OLTConfig{{Name: "OLT1", NoPaging: true,
		Autofind: []sim.AutofindONT{{Port: "0/1/0", SN: "4857544311E70E9A", Seen: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	x := dialCLI(t, srv.TelnetAddr(), "OLT1")
	run := func(cmd string) []string {
		x.send(cmd)
		out := x.until("#", "}:")
		if strings.HasSuffix(strings.TrimRight(out, " "), "}:") {
			x.send("")
			out += x.until("#")
		}
		var ls []string
		for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
			ls = append(ls, strings.TrimRight(l, " "))
		}
		return ls
	}
	for _, cmd := range []string{"enable", "config", "vlan 2250 smart", "ont-lineprofile gpon profile-id 10", "tcont 1 dba-profile-id 1",
		"gem add 1 eth tcont 1", "gem mapping 1 0 vlan 200", "quit", "ont-srvprofile gpon profile-id 10", "ont-port eth 1", "quit", "interface gpon 0/1",
		`ont add 0 sn-auth "4857544311E70E9C" omci ont-lineprofile-id 10 ont-srvprofile-id 10 desc "Generic_description"`, "quit",
		"service-port vlan 2250 gpon 0/1/0 ont 0 gemport 1 multi-service user-vlan 200 tag-transform translate"} {
		run(cmd)
	}
	for _, c := range []struct {
		cmd, capture string
		verbatim     []int // capture line numbers (1-based) that must appear as they are
		columns      []int // capture data rows whose field columns must match a sim row
	}{
		{"display vlan all", "huawei_display_vlan_all__ramadlana-ansible.txt", []int{8, 9, 10, 11, 44}, nil},
		{"display dba-profile all", "huawei_display_dba-profile_all__node-exec7-project.txt", []int{2, 3, 4, 5, 6}, nil},
		{"display traffic table ip from-index 0", "huawei_display_traffic_table_ip_from-index_0__ma5800x7-node-test.txt", []int{2, 3, 4, 5, 7}, []int{6}},
		{"display ont-lineprofile gpon all", "huawei_display_ont-lineprofile_gpon_all__ntc-templates.txt", []int{2, 3, 4, 5}, nil},
		{"display ont-srvprofile gpon all", "huawei_display_ont-srvprofile_gpon_all__ntc-templates.txt", []int{2, 3, 4, 5}, nil},
		{"display board 0", "huawei_display_board_0__ntc-templates.txt", []int{2, 3, 4}, []int{5}},
		{"display board 0/1", "huawei_display_board_0_6_gpon_ports__ma5800x7-health-test.txt", []int{3, 5, 6, 7, 8, 9, 10, 11, 12, 13}, nil},
		{"display service-port all", "huawei_display_service-port_vlan_2250__ramadlana-ansible.txt", []int{8, 9, 10, 11, 12, 25, 27, 28}, []int{13}},
		{"display ont info 0 1 0 all", "huawei_display_ont_info_0_1_0_all__ntc-templates.txt", []int{2, 3, 4, 5, 38, 39, 40}, []int{6, 41}},
		{"display ont autofind all", "huawei_display_ont_autofind_all__ntc-templates-2.txt", []int{2, 3, 4, 5, 6, 7, 8, 9, 16, 17}, nil},
		{"display version", "huawei_display_version__ntc-templates.txt", []int{6, 7}, nil},
		{"display ont info summary 0/1/0", "huawei_display_ont_info_summary__ntc-templates-2.txt", []int{3, 5, 6, 7, 8, 11, 12, 13}, []int{9}},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			got := run(c.cmd)
			want := capture(t, c.capture)
			have := map[string]bool{}
			for _, l := range got {
				have[l] = true
			}
			for _, n := range c.verbatim {
				if !have[want[n-1]] {
					t.Errorf("line %d of %s not printed:\n%q\nsimulator printed:\n%s", n, c.capture, want[n-1], strings.Join(got, "\n"))
				}
			}
			for _, n := range c.columns {
				w := starts(want[n-1])
				found := false
				for _, l := range got {
					if cmp.Equal(w, starts(l)) {
						found = true
					}
				}
				if !found {
					t.Errorf("no row with the columns of line %d of %s (%v):\n%q\nsimulator printed:\n%s", n, c.capture, w, want[n-1], strings.Join(got, "\n"))
				}
			}
		})
	}
}
