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
	alarmFieldRe = regexp.MustCompile(`^\s*(ALARM NAME|ALARM ID|ALARM TYPE|PARAMETERS|DESCRIPTION|CAUSE|ADVICE|SRVEFF)\s*:`)
)

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
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		switch {
		case IsParamPrompt(l):
			continue
		case t == "Command:":
			// The echo of the command follows on the next line.
			i++
			continue
		case strings.HasPrefix(t, "Command is being executed"):
			continue
		case strings.Contains(l, "!") && alarmHeadRe.MatchString(l):
			block := []string{t}
			for i+1 < len(lines) && alarmFieldRe.MatchString(lines[i+1]) {
				i++
				block = append(block, strings.TrimSpace(lines[i]))
			}
			// The blank line the OLT prints after a block is part of it.
			if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "" {
				i++
			}
			alarms = append(alarms, strings.Join(block, "\n"))
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
