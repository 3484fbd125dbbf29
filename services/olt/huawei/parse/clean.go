// Package parse turns the text a Huawei SmartAX OLT prints into the typed
// results of package driver. Every parser accepts the raw reply of one
// command (or a whole captured session) and survives what real devices
// print around the data: CRLF, ANSI cursor codes, the paging prompt and its
// erase residue, the `{ <cr>|... }:` parameter prompt, the `Command:` echo,
// asynchronous alarm blocks, wrapped descriptions and both F/S/P spellings.
// Parsers never panic; lines they do not understand are skipped.
package parse

import (
	"regexp"
	"strconv"
	"strings"
)

// MoreMarker is the paging prompt a Huawei OLT prints after a screenful.
const MoreMarker = "---- More ( Press 'Q' to break ) ----"

var (
	// The OLT erases the More prompt by moving the cursor left, printing
	// spaces over it and moving left again; the next row follows on the
	// same line, so the marker and its residue become a line break.
	moreRe       = regexp.MustCompile(`(?:\r?\n)?-+ More \( Press 'Q' to break \) -+(?:\x1b\[\d*D *\x1b\[\d*D)?`)
	ansiRe       = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]`)
	paramRe      = regexp.MustCompile(`^\s*\{ ?<cr>.*\}:\s*$`)
	alarmHeadRe  = regexp.MustCompile(`^\s*! ?(EVENT|ALARM|CRITICAL|MAJOR|MINOR|WARNING|RECOVERY|CLEARED)\b`)
	alarmFieldRe = regexp.MustCompile(`^(\s*)(ALARM NAME|EVENT NAME|ALARM ID|ALARM TYPE|ALARM SOURCE|PARAMETERS|DESCRIPTION|CAUSE|ADVICE|SRVEFF)\s*:\s*`)
	// The numbered header real OLTs print before an alarm:
	// `  ! 1 [01/01/2000 00:00:00-00:00]:` (netmiko issue 3559), also
	// without the blank before the bracket (NOC project's MA5600T profile).
	alarmNumRe = regexp.MustCompile(`^\s*!\s*\d+\s*\[[^\]]*\]:?\s*$`)
	// The alarm line itself: `ALARM 11111 FAULT WARNING 0x2e112007 SERVICE
	// QUALITY 17/01/2025 00:00:00-00:00`, broken wherever it passes the
	// screen's width; events say `EVENT N RUNNING WARNING ...` and
	// `EVENT NAME :` (the NOC project's MA5600T profile).
	alarmLineRe = regexp.MustCompile(`^\s*(?:ALARM|EVENT)\s+\d+\s+(FAULT|RECOVERY|EVENT|CLEAR|CLEARED|RESTORE|RUNNING)\b`)
	// The end marker: `  --- END` (`--- END-` in the capture).
	alarmEndRe = regexp.MustCompile(`^\s*-+\s*END\b`)
	// A piece of a broken alarm line: the rest of its time stamp.
	alarmTimeRe = regexp.MustCompile(`^\s*\d{1,2}:\d{2}:\d{2}\S*\s*$`)
)

// maxAlarmLines bounds how far an alarm block is looked for its end
// marker: a header without one within it is taken field by field.
const maxAlarmLines = 120

// IsParamPrompt reports whether line is the parameter prompt that waits
// for Enter before the command runs, such as `{ <cr>||<K> }:`.
func IsParamPrompt(line string) bool {
	return strings.Contains(line, "<cr>") && paramRe.MatchString(line)
}

// Clean normalises a raw reply: paging residue and ANSI codes removed, CRLF
// made LF, parameter prompts, the `Command:` echo, `Command is being
// executed` notices and alarm blocks dropped. The alarm blocks are returned
// separately, one string per block.
func Clean(raw string) (text string, alarms []string) {
	s := raw
	if strings.Contains(s, " More ") {
		s = moreRe.ReplaceAllString(s, "\n")
	}
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansiRe.ReplaceAllString(s, "")
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "")
	s = strings.ReplaceAll(s, "\x00", "")
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	echo := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		switch {
		case IsParamPrompt(l):
			continue
		case t == "Command:":
			// The echo of the command follows on the next line (after an
			// alarm printed between them, if any).
			echo = true
			continue
		case strings.HasPrefix(t, "Command is being executed"):
			continue
		case isAlarmStart(l):
			// The OLT starts an alarm on a fresh line: a blank line just
			// before it is the alarm's.
			if n := len(out); n > 0 && out[n-1] == "" {
				out = out[:n-1]
			}
			end, block := alarmBlock(lines, i)
			i = end
			// The blank line the OLT prints after a block is part of it.
			if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "" {
				i++
			}
			alarms = append(alarms, block)
			continue
		case echo && t != "":
			echo = false
			continue
		}
		out = append(out, strings.TrimRight(l, " \t"))
	}
	return strings.Join(out, "\n"), alarms
}

// lines returns the cleaned, non-empty lines of raw.
func lines(raw string) []string {
	text, _ := Clean(raw)
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// isRule reports whether a line is a dashed separator.
func isRule(l string) bool {
	t := strings.TrimSpace(l)
	return len(t) >= 5 && strings.Trim(t, "-") == ""
}

func atoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0
	}
	return n
}

// atoiOr returns def for values the OLT prints as `-` or `off`.
func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return def
	}
	return n
}

func floatPtr(s string) *float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return nil
	}
	return &f
}

func intPtr(s string) *int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return nil
	}
	return &n
}

// fspRe matches a frame/slot/port in any spelling the OLT uses:
// `0/1/0`, `0/ 1/0`, `0/1 /0`.
var fspRe = regexp.MustCompile(`(\d+)\s*/\s*(\d+)\s*/\s*(\d+)`)

// FSP normalises a frame/slot/port to `F/S/P`; ok is false when s holds none.
func FSP(s string) (fsp string, ok bool) {
	m := fspRe.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	return m[1] + "/" + m[2] + "/" + m[3], true
}

// SplitFSP splits `F/S/P` into its numbers.
func SplitFSP(s string) (f, sl, p int, ok bool) {
	m := fspRe.FindStringSubmatch(s)
	if m == nil || strings.TrimSpace(s) != strings.TrimSpace(m[0]) {
		return 0, 0, 0, false
	}
	return atoi(m[1]), atoi(m[2]), atoi(m[3]), true
}

// isAlarmStart reports whether a line begins an asynchronous alarm block:
// a numbered header, the short `! EVENT ...` header, or an alarm line
// whose header was printed before the reply began.
func isAlarmStart(l string) bool {
	if strings.Contains(l, "!") {
		return alarmNumRe.MatchString(l) || alarmHeadRe.MatchString(l)
	}
	return (strings.Contains(l, "ALARM") || strings.Contains(l, "EVENT")) && alarmLineRe.MatchString(l)
}

// alarmBlock takes the alarm block starting at lines[i] and returns the
// index of its last line and its text, normalised: blanks and the end
// marker dropped, the alarm line and every field joined back into one
// line each.
func alarmBlock(lines []string, i int) (int, string) {
	// A block with an end marker is everything up to it, whatever the
	// OLT printed inside (broken lines, indented continuations, a paging
	// break).
	for k := i + 1; k < len(lines) && k <= i+maxAlarmLines; k++ {
		l := lines[k]
		if k > i+1 && (alarmNumRe.MatchString(l) || alarmHeadRe.MatchString(l)) {
			break // the next block began: this one has no marker
		}
		if alarmEndRe.MatchString(l) {
			end := k
			// The capture of netmiko issue 3559 shows a line of stars
			// after the marker.
			if end+1 < len(lines) && strings.Trim(strings.TrimSpace(lines[end+1]), "*") == "" && strings.TrimSpace(lines[end+1]) != "" {
				end++
			}
			return end, joinAlarm(lines[i:k])
		}
	}
	// Without a marker (the short format): the header, blank lines before
	// the alarm line, the alarm line and its broken rest, the fields and
	// their indented continuations.
	end := i
	if alarmNumRe.MatchString(lines[i]) {
		j := i + 1
		for j < len(lines) && j <= i+2 && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j < len(lines) && (alarmLineRe.MatchString(lines[j]) || alarmFieldRe.MatchString(lines[j])) {
			end = j - 1
		}
	}
	if end+1 < len(lines) && alarmLineRe.MatchString(lines[end+1]) {
		end++
	}
	if alarmLineRe.MatchString(lines[end]) && end+1 < len(lines) && alarmTimeRe.MatchString(lines[end+1]) {
		end++
	}
	col := -1 // the column of the current field's value
	for end+1 < len(lines) {
		next := lines[end+1]
		if m := alarmFieldRe.FindStringIndex(next); m != nil {
			col = m[1]
			end++
			continue
		}
		indent := len(next) - len(strings.TrimLeft(next, " "))
		// The device aligns continuations under the value (one more blank
		// when the wrap fell on one).
		if col >= 8 && (indent == col || indent == col+1) && strings.TrimSpace(next) != "" {
			end++
			continue
		}
		break
	}
	return end, joinAlarm(lines[i : end+1])
}

// joinAlarm normalises the lines of one alarm block: every line trimmed,
// blanks dropped, a continuation (an indented line or the broken rest of
// the alarm line) joined to the line before it with one blank.
func joinAlarm(lines []string) string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || alarmEndRe.MatchString(l) {
			continue
		}
		starts := alarmNumRe.MatchString(l) || alarmHeadRe.MatchString(l) || alarmLineRe.MatchString(l) || alarmFieldRe.MatchString(l)
		if !starts && len(out) > 0 {
			out[len(out)-1] += " " + t
			continue
		}
		if m := alarmFieldRe.FindStringSubmatch(l); m != nil {
			t = m[2] + " : " + strings.TrimSpace(l[len(m[0]):])
			t = strings.TrimRight(t, " ")
		}
		out = append(out, t)
	}
	return strings.Join(out, "\n")
}

// Alarm is what an alarm block says, as far as it says it.
type Alarm struct {
	Seq      int    `json:"seq,omitempty"`      // the number of the header
	ID       int    `json:"id,omitempty"`       // the alarm's serial number
	Kind     string `json:"kind,omitempty"`     // FAULT, RECOVERY, EVENT
	Severity string `json:"severity,omitempty"` // CRITICAL, MAJOR, MINOR, WARNING
	Code     string `json:"code,omitempty"`     // 0x2e112007
	Category string `json:"category,omitempty"` // SERVICE QUALITY, EQUIPMENT, ...
	Time     string `json:"time,omitempty"`
	Name     string `json:"name,omitempty"`
	// Parameters are the PARAMETERS field's `key: value` pairs
	// (FrameID, SlotID, PortID, ONT ID, ...).
	Parameters map[string]string `json:"parameters,omitempty"`
	Cause      string            `json:"cause,omitempty"`
}

var (
	alarmNumPartsRe  = regexp.MustCompile(`^!\s*(\d+)\s*\[([^\]]*)\]`)
	alarmLinePartsRe = regexp.MustCompile(`^(?:ALARM|EVENT)\s+(\d+)\s+(\S+)\s+(\S+)\s+(0x[0-9A-Fa-f]+)\s+(.*?)\s+(\d{1,4}[-/]\d{1,2}[-/]\d{1,4}\s+\S+)\s*$`)
	alarmShortRe     = regexp.MustCompile(`^!\s*(\S+)\s+(\S+)\s+(.*)$`)
	alarmParamRe     = regexp.MustCompile(`([A-Za-z][A-Za-z /]*?)\s*:\s*([^,]*)`)
)

// ParseAlarm reads a block as Clean returns it.
func ParseAlarm(block string) Alarm {
	var a Alarm
	for _, l := range strings.Split(block, "\n") {
		if m := alarmNumPartsRe.FindStringSubmatch(l); m != nil {
			a.Seq = atoi(m[1])
			if a.Time == "" {
				a.Time = strings.TrimSpace(m[2])
			}
			continue
		}
		if m := alarmLinePartsRe.FindStringSubmatch(l); m != nil {
			a.ID, a.Kind, a.Severity, a.Code, a.Category, a.Time = atoi(m[1]), m[2], m[3], m[4], m[5], m[6]
			continue
		}
		if m := alarmShortRe.FindStringSubmatch(l); m != nil && alarmHeadRe.MatchString(l) {
			a.Kind, a.Severity, a.Time = m[1], m[2], m[3]
			continue
		}
		key, val, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(key) {
		case "ALARM NAME", "EVENT NAME":
			a.Name = val
		case "CAUSE":
			a.Cause = val
		case "PARAMETERS":
			a.Parameters = map[string]string{}
			for _, m := range alarmParamRe.FindAllStringSubmatch(val, -1) {
				a.Parameters[strings.TrimSpace(m[1])] = strings.TrimSpace(m[2])
			}
		}
	}
	return a
}
