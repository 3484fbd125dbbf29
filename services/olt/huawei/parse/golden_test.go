package parse

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the parsers' output")

// body drops the collector's `# source:` line so parsers see only what the
// device printed.
func body(raw string) string {
	if strings.HasPrefix(raw, "# source:") {
		if i := strings.IndexByte(raw, '\n'); i >= 0 {
			return raw[i+1:]
		}
	}
	return raw
}

var sectionRe = regexp.MustCompile(`(?m)^#=== (.*?) ===\s*$`)

// sections splits a capture the collector divided with `#=== name ===`
// lines into named parts.
func sections(raw string) map[string]string {
	out := map[string]string{}
	idx := sectionRe.FindAllStringSubmatchIndex(raw, -1)
	for i, m := range idx {
		end := len(raw)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		out[raw[m[2]:m[3]]] = raw[m[1]:end]
	}
	return out
}

func bySection(parsers map[string]func(string) any) func(string) any {
	return func(raw string) any {
		out := map[string]any{}
		for name, text := range sections(raw) {
			for prefix, p := range parsers {
				if strings.HasPrefix(name, prefix) {
					out[name] = p(text)
				}
			}
		}
		return out
	}
}

func withErr(p func(string) any) func(string) any {
	return func(raw string) any { return map[string]any{"result": p(raw), "error": Error(raw)} }
}

// jsUnquote turns the JS array-literal capture back into the session text.
func jsUnquote(raw string) string {
	var b strings.Builder
	re := regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`)
	for _, m := range re.FindAllStringSubmatch(raw, -1) {
		s := strings.ReplaceAll(m[1], `\r`, "\r")
		b.WriteString(s + "\n")
	}
	return b.String()
}

// goldenParsers names the parser of every capture in testdata; a capture
// missing here fails the test, so a new capture cannot be forgotten.
func goldenParsers() map[string]func(string) any {
	kv := func(s string) any { return KeyValues(s) }
	version := func(s string) any { return ParseVersion(s) }
	profiles := func(s string) any { return ParseProfiles(s) }
	rows := func(s string) any { return Rows(s) }
	session := func(s string) any { return ParseSession(s) }
	return map[string]func(string) any{
		"huawei_alarm_while_typing__netmiko-issue-3559.txt": func(s string) any {
			text, blocks := Clean(s)
			parsed := []Alarm{}
			for _, b := range blocks {
				parsed = append(parsed, ParseAlarm(b))
			}
			return map[string]any{"text": text, "alarms": blocks, "parsed": parsed}
		},
		"huawei_config_mode_prompts_profiles__ea5800-x2-guide.txt":             session,
		"huawei_display_board_0_6_gpon_ports__ma5800x7-health-test.txt":        func(s string) any { return ParseBoardPorts(s, "0/6") },
		"huawei_display_board_0__ma5800x7-health-test.txt":                     func(s string) any { return ParseBoards(s) },
		"huawei_display_board_0__ntc-templates.txt":                            func(s string) any { return ParseBoards(s) },
		"huawei_display_current-configuration__pop17-ma5800-backup.txt":        func(s string) any { return ParseConfig(s) },
		"huawei_display_dba-profile_all__node-exec7-project.txt":               func(s string) any { return ParseDBAProfiles(s) },
		"huawei_display_interface_paramprompt__nso-huawei-ias-ma5800x17.txt":   func(s string) any { return ParseInterfaces(s) },
		"huawei_display_ont-lineprofile_gpon_all__gestISP.txt":                 profiles,
		"huawei_display_ont-lineprofile_gpon_all__ntc-templates.txt":           profiles,
		"huawei_display_ont-srvprofile_gpon_all__node-exec7-project.txt":       profiles,
		"huawei_display_ont-srvprofile_gpon_all__ntc-templates.txt":            profiles,
		"huawei_display_ont_autofind_0__ea5800-x2-guide.txt":                   withErr(func(s string) any { return ParseAutofind(s) }),
		"huawei_display_ont_autofind_all__ntc-templates-1.txt":                 func(s string) any { return ParseAutofind(s) },
		"huawei_display_ont_autofind_all__ntc-templates-2.txt":                 func(s string) any { return ParseAutofind(s) },
		"huawei_display_ont_info_0_0_6_2__ntc-templates.txt":                   func(s string) any { d, _ := ParseONTDetail(s); return d },
		"huawei_display_ont_info_0_1_0_all__ntc-templates.txt":                 func(s string) any { return ParseONTTable(s) },
		"huawei_display_ont_info_0_2_1_all__node-exec7-project.txt":            func(s string) any { return ParseONTTable(s) },
		"huawei_display_ont_info_0_all_total-number-is__ntc-templates.txt":     func(s string) any { return ParseONTTable(s) },
		"huawei_display_ont_info_0_0_0_protect_mismatch__ntc-templates.txt":    func(s string) any { return ParseONTTable(s) },
		"huawei_display_ont_info_two_ports__ntc-templates.txt":                 func(s string) any { return ParseONTTable(s) },
		"huawei_display_ont_info_by-sn__ma5608t-php-notes.txt":                 func(s string) any { d, _ := ParseONTDetail(s); return d },
		"huawei_display_ont_info_by-sn_offline__ma5608t-php-notes.txt":         func(s string) any { d, _ := ParseONTDetail(s); return d },
		"huawei_display_ont_info_summary__ntc-templates-1.txt":                 func(s string) any { return ParseSummary(s) },
		"huawei_display_ont_info_summary__ntc-templates-2.txt":                 func(s string) any { return ParseSummary(s) },
		"huawei_display_ont_info_summary__ntc-templates-3.txt":                 func(s string) any { return ParseSummary(s) },
		"huawei_display_ont_load_state_all__ma5608t-php-notes.txt":             rows,
		"huawei_display_ont_optical-info_0_all__ntc-templates.txt":             func(s string) any { return ParseONTOptical(s) },
		"huawei_display_ont_wan-info__ma5608t-php-notes.txt":                   kv,
		"huawei_display_service-port_all__ntc-templates.txt":                   func(s string) any { return ParseServicePorts(s) },
		"huawei_display_service-port_port_ont__ma5608t-php-notes.txt":          func(s string) any { return ParseServicePorts(s) },
		"huawei_display_service-port_vlan_2250__ramadlana-ansible.txt":         func(s string) any { return ParseServicePorts(s) },
		"huawei_display_service-port_vlan_3001__ramadlana-ansible.txt":         func(s string) any { return ParseServicePorts(s) },
		"huawei_display_system_sys-info_paramprompt__netmiko-pr-3562.txt":      func(s string) any { return ParseLabelled(s) },
		"huawei_display_traffic_table_ip_from-index_0__ma5800x7-node-test.txt": func(s string) any { return ParseTrafficTables(s) },
		"huawei_display_version__nso-huawei-ias-ma5800x17.txt":                 version,
		"huawei_display_version__ntc-templates.txt":                            version,
		"huawei_display_version_sysuptime_temperature_power_frame__ma5800x7-health-test.txt": bySection(map[string]func(string) any{
			"display version": version, "display sysuptime": version, "display time": func(s string) any { return strings.TrimSpace(s) },
			"display temperature": func(s string) any { return ParseTemperatures(s) }, "display power": rows, "display frame": kv,
		}),
		"huawei_display_vlan_all__gestISP.txt":                                      func(s string) any { return ParseVLANs(s) },
		"huawei_display_vlan_all__ramadlana-ansible.txt":                            func(s string) any { return ParseVLANs(s) },
		"huawei_error_catalog_ma5800v100r018__skills-db.txt":                        func(s string) any { return Errors(s) },
		"huawei_interface_gpon_display_ont_ipconfig__nso-huawei-ias-ma5800x17.txt":  func(s string) any { return map[string]any{"session": ParseSession(s), "blocks": KeyValues(s)} },
		"huawei_login_banner_enable_unknown-command_help__pop03-ma5800-session.txt": session,
		"huawei_ont_add_failure_lineprofile_missing__ma5683t-villanueva.txt":        withErr(func(s string) any { a, _ := ParseONTAdded(s); return a }),
		"huawei_ont_add_failure_sn_exists__ma5608t-php-notes.txt":                   withErr(func(s string) any { a, _ := ParseONTAdded(s); return a }),
		"huawei_ont_add_success__ma5608t-php-notes.txt":                             withErr(func(s string) any { a, _ := ParseONTAdded(s); return a }),
		"huawei_ont_add_two-step_enter__ma5800x7-node-test.txt": bySection(map[string]func(string) any{
			"answer to `ont add ...` BEFORE": func(s string) any { return paramPrompts(s) },
			"answer AFTER":                   withErr(func(s string) any { a, _ := ParseONTAdded(s); return a }),
			"display ont info":               withErr(func(s string) any { d, _ := ParseONTDetail(s); return d }),
			"other single-line answers":      func(s string) any { return Errors(s) },
		}),
		"huawei_ont_delete__ea5800-x2-guide.txt": bySection(map[string]func(string) any{
			"ont delete": withErr(func(s string) any { n, _ := Count(s); return n }),
		}),
		"huawei_ont_delete_help_and_success__pop13-ma5800-notes.txt": func(s string) any {
			n, ok := Count(s)
			return map[string]any{"session": ParseSession(s), "deleted": n, "ok": ok}
		},
		"huawei_pagination_more_prompt__gestISP.txt":            profiles,
		"huawei_param_prompts_catalog__driver-code-strings.txt": func(s string) any { return paramPrompts(s) },
		"huawei_service-port_failure_gem_missing__ma5683t-villanueva.txt": bySection(map[string]func(string) any{
			"ont add":                withErr(func(s string) any { a, _ := ParseONTAdded(s); return a }),
			"service-port":           withErr(func(s string) any { return nil }),
			"display ont info by-sn": withErr(func(s string) any { return nil }),
		}),
		"huawei_smart_mode_and_logout_confirm__netmiko-issue-609.txt": func(s string) any {
			return map[string]any{"session": ParseSession(s), "prompts": paramPrompts(s)}
		},
		"huawei_traffic_table_exists_already_char_echo__netmiko-issue-1628.txt": func(s string) any { return Errors(s) },
		"huawei_traffic_table_ip_add_answer__ma5800x7-python-docstring.txt": bySection(map[string]func(string) any{
			"answer to traffic table": func(s string) any {
				i, n, ok := TrafficTableCreated(s)
				return map[string]any{"index": i, "name": n, "ok": ok}
			},
			"display traffic table": func(s string) any { return ParseTrafficTables(s) },
		}),
		"huawei_undo_service-port_confirm__ea5800-x2-guide.txt": func(s string) any {
			n, ok := Count(s)
			return map[string]any{"deleted": n, "ok": ok, "confirm": Confirmation(s)}
		},
		"huawei_undo_smart_display_ont-lineprofile_profile-id__node-exec7-ma5608t.txt": func(s string) any {
			s = jsUnquote(s)
			return map[string]any{"session": ParseSession(s), "profiles": ParseProfiles(s)}
		},
	}
}

// paramPrompts lists the lines of s that are parameter prompts or y/n
// confirmations, as the session recognises them.
func paramPrompts(s string) []string {
	out := []string{}
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r", ""), "\n") {
		if IsParamPrompt(l) || Confirmation(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/huawei_*.txt")
	if err != nil {
		t.Fatal(err)
	}
	parsers := goldenParsers()
	if len(files) != len(parsers) {
		t.Errorf("%d captures, %d parsers named", len(files), len(parsers))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			p, ok := parsers[name]
			if !ok {
				t.Fatalf("no parser named for capture %s", name)
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(p(body(string(raw))), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".txt") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if diff := cmp.Diff(strings.TrimSpace(string(want)), strings.TrimSpace(string(got))); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		})
	}
}
