package parse

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// realAlarm is the alarm block of the capture of netmiko issue 3559, as
// the OLT printed it (numbered header, alarm line broken over two lines,
// indented continuations, end marker).
func realAlarm(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("testdata/huawei_alarm_while_typing__netmiko-issue-3559.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(body(string(raw)), "\n")
	return strings.Join(lines[1:22], "\n") + "\n"
}

// An alarm block is taken out of an output wherever it falls, in the
// format real OLTs print and in the short one, one or two at a time: the
// parsed result is the same as without it, and the block comes back as
// one alarm with its broken lines joined.
func TestAlarmsAnywhereInAnOutput(t *testing.T) {
	real := realAlarm(t)
	short := "\n  ! EVENT WARNING 2026-01-01 00:00:00+00:00\n  ALARM NAME :The ONT is offline\n  PARAMETERS :FrameID: 0, SlotID: 1, PortID: 0,\n              ONT ID: 3\n\n"
	// An event, as the NOC project's MA5600T profile expects one
	// (`RUNNING WARNING ... 12:44:17` then `EVENT NAME :`), without an
	// end marker.
	event := "  ! 7[2026-01-01 12:44:17]:\n\n  EVENT 2345 RUNNING WARNING 0x2e2d2002 SYSTEM 2026-01-01 12:44:17\n  EVENT NAME  : The ONT LOS event\n  PARAMETERS  : FrameID: 0, SlotID: 1, PortID: 2, ONT ID: 3\n"
	for _, capture := range []struct {
		file  string
		parse func(string) any
	}{
		{"huawei_display_ont_info_0_1_0_all__ntc-templates.txt", func(s string) any { return ParseONTTable(s) }},
		{"huawei_display_ont_info_by-sn__ma5608t-php-notes.txt", func(s string) any { d, _ := ParseONTDetail(s); return d }},
		{"huawei_display_current-configuration__pop17-ma5800-backup.txt", func(s string) any { return ParseConfig(s) }},
		{"huawei_display_service-port_vlan_3001__ramadlana-ansible.txt", func(s string) any { return ParseServicePorts(s) }},
	} {
		raw, err := os.ReadFile("testdata/" + capture.file)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(body(string(raw)), "\r\n", "\n")
		want := capture.parse(text)
		wantText, _ := Clean(text)
		lines := strings.Split(text, "\n")
		for _, alarm := range []struct{ name, text string }{{"real", real}, {"short", short}, {"event", event}, {"two", real + short}} {
			n := strings.Count(alarm.text, " NAME ")
			// Every line of the short captures; about 150 places spread
			// over the running configuration.
			step := max(1, len(lines)/150)
			for at := 0; at <= len(lines); at += step {
				with := strings.Join(lines[:at], "\n")
				if at > 0 {
					with += "\n"
				}
				with += alarm.text + strings.Join(lines[at:], "\n")
				got, blocks := Clean(with)
				if len(blocks) != n {
					t.Fatalf("%s, %s alarm after line %d: %d blocks, want %d", capture.file, alarm.name, at, len(blocks), n)
				}
				if strings.Contains(got, "ALARM") || strings.Contains(got, "EVENT") || strings.Contains(got, "END-") || strings.Contains(got, "LOSi") || strings.Contains(got, "ONT ID: 3") {
					t.Fatalf("%s, %s alarm after line %d: left in the text:\n%s", capture.file, alarm.name, at, got)
				}
				if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(wantText), " ") {
					t.Fatalf("%s, %s alarm after line %d: text changed", capture.file, alarm.name, at)
				}
				if res := capture.parse(with); !reflect.DeepEqual(res, want) {
					t.Fatalf("%s, %s alarm after line %d: result changed\n got %+v\nwant %+v", capture.file, alarm.name, at, res, want)
				}
			}
		}
	}
	_, blocks := Clean(real)
	a := ParseAlarm(blocks[0])
	if a.Name != "The distribute fiber is broken or the OLT cannot receive expected optical signals from the ONT(LOSi/LOBi)" ||
		a.Time != "17/01/2025 00:00:00-00:00" || a.Parameters["ONT ID"] != "1" || a.Parameters["Equipment ID"] != "1H" || a.Seq != 1 || a.ID != 11111 {
		t.Errorf("parsed %+v", a)
	}
	_, blocks = Clean(event)
	if a := ParseAlarm(blocks[0]); a.Name != "The ONT LOS event" || a.Kind != "RUNNING" || a.Seq != 7 || a.ID != 2345 || a.Parameters["ONT ID"] != "3" {
		t.Errorf("event parsed %+v from %q", a, blocks[0])
	}
	_, blocks = Clean(short)
	if a := ParseAlarm(blocks[0]); a.Name != "The ONT is offline" || a.Parameters["ONT ID"] != "3" {
		t.Errorf("short parsed %+v from %q", a, blocks[0])
	}
}
