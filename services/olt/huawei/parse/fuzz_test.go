package parse

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParsers feeds every parser the same input: none may panic, whatever
// the OLT (or a broken connection) sends. The seed corpus is the captures.
func FuzzParsers(f *testing.F) {
	files, _ := filepath.Glob("testdata/huawei_*.txt")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("---- More ( Press 'Q' to break ) ----\x1b[37D \x1b[37D  0/ 1/0 1 ")
	f.Fuzz(func(t *testing.T, s string) {
		Clean(s)
		Error(s)
		Errors(s)
		KeyValues(s)
		ParseVersion(s)
		ParseAutofind(s)
		ParseONTDetail(s)
		ParseONTOpticalDetail(s, 0)
		ParsePortOptical(s)
		ParseCounters(s)
		ParseBoards(s)
		ParseBoardPorts(s, "0/1")
		ParseONTTable(s)
		ParseSummary(s)
		ParseONTOptical(s)
		ParseServicePorts(s)
		ParseVLANs(s)
		ParseDBAProfiles(s)
		ParseProfiles(s)
		ParseTrafficTables(s)
		TrafficTableCreated(s)
		ParseONTAdded(s)
		Count(s)
		ParseConfig(s)
		ConfigServicePort(s)
		ParseSession(s)
		Rows(s)
		ParseTemperatures(s)
		ParseInterfaces(s)
		ParseLabelled(s)
		Confirmation(s)
		FSP(s)
		SplitFSP(s)
	})
}

// BenchmarkParse measures parser throughput over the largest capture, the
// running configuration, and the ONT table.
func BenchmarkParse(b *testing.B) {
	for _, c := range []struct {
		name, file string
		parse      func(string)
	}{
		{"config", "huawei_display_current-configuration__pop17-ma5800-backup.txt", func(s string) { ParseConfig(s) }},
		{"ont-table", "huawei_display_ont_info_0_1_0_all__ntc-templates.txt", func(s string) { ParseONTTable(s) }},
		{"service-ports", "huawei_display_service-port_vlan_2250__ramadlana-ansible.txt", func(s string) { ParseServicePorts(s) }},
	} {
		raw, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			b.Fatal(err)
		}
		s := string(raw)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				c.parse(s)
			}
		})
	}
}
