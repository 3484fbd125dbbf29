package parse

import (
	"regexp"
	"strings"
)

// Rows returns the data rows of a simple table: lines between dashed rules
// whose first field is a number or an F/S/P, split into fields. It serves
// the small tables the router only shows (load state, power).
func Rows(raw string) [][]string {
	out := [][]string{}
	for _, l := range lines(raw) {
		f := strings.Fields(l)
		if len(f) == 0 || isRule(l) {
			continue
		}
		if _, ok := SplitFSPField(f[0]); ok || isInt(f[0]) {
			out = append(out, f)
		}
	}
	return out
}

// SplitFSPField reports whether a single field is an F/S/P.
func SplitFSPField(s string) (string, bool) {
	if _, _, _, ok := SplitFSP(s); ok {
		return s, true
	}
	return "", false
}

// Temperature is one board's row of `display temperature 0`.
type Temperature struct {
	Slot         int    `json:"slot"`
	Board        string `json:"board"`
	TemperatureC int    `json:"temperature_c"`
}

var tempRe = regexp.MustCompile(`SlotID:\s*(\d+)\s+BoardName:\s*(\S+)\s+Temperature:\s*(-?\d+)C`)

// ParseTemperatures parses `display temperature F`.
func ParseTemperatures(raw string) []Temperature {
	out := []Temperature{}
	for _, l := range lines(raw) {
		if m := tempRe.FindStringSubmatch(l); m != nil {
			out = append(out, Temperature{Slot: atoi(m[1]), Board: m[2], TemperatureC: atoi(m[3])})
		}
	}
	return out
}

// Interface is one block of `display interface`.
type Interface struct {
	Name        string `json:"name"`
	State       string `json:"state"`
	Protocol    string `json:"protocol,omitempty"`
	Description string `json:"description,omitempty"`
	Address     string `json:"address,omitempty"`
	MTU         int    `json:"mtu,omitempty"`
}

var (
	ifStateRe = regexp.MustCompile(`^\s*(\S+) current state : (\S+)`)
	ifProtoRe = regexp.MustCompile(`Line protocol current state : (\S+)`)
	ifAddrRe  = regexp.MustCompile(`Internet Address is (\S+)`)
	ifMTURe   = regexp.MustCompile(`Maximum Transmit Unit is (\d+)`)
	ifDescRe  = regexp.MustCompile(`^\s*Description : (.*)$`)
)

// ParseInterfaces parses `display interface`.
func ParseInterfaces(raw string) []Interface {
	out := []Interface{}
	for _, l := range lines(raw) {
		if m := ifProtoRe.FindStringSubmatch(l); m != nil && len(out) > 0 {
			out[len(out)-1].Protocol = m[1]
			continue
		}
		if m := ifStateRe.FindStringSubmatch(l); m != nil {
			out = append(out, Interface{Name: m[1], State: m[2]})
			continue
		}
		if len(out) == 0 {
			continue
		}
		cur := &out[len(out)-1]
		if m := ifDescRe.FindStringSubmatch(l); m != nil {
			cur.Description = m[1]
		} else if m := ifAddrRe.FindStringSubmatch(l); m != nil {
			cur.Address = m[1]
		} else if m := ifMTURe.FindStringSubmatch(l); m != nil {
			cur.MTU = atoi(m[1])
		}
	}
	return out
}

// ParseLabelled parses the `label:` line followed by an indented value
// line layout of `display system sys-info`.
func ParseLabelled(raw string) []KV {
	out := []KV{}
	var label string
	for _, l := range lines(raw) {
		t := strings.TrimSpace(l)
		if isRule(l) || promptRe.MatchString(l) {
			continue
		}
		if strings.HasSuffix(t, ":") {
			label = strings.TrimSuffix(t, ":")
			continue
		}
		if label != "" {
			out = append(out, KV{Key: label, Value: t})
			label = ""
		}
	}
	return out
}

var confirmRe = regexp.MustCompile(`\(y/n\)\[[yn]\]:`)

// Confirmation returns the question of a y/n dialog at the end of s (such
// as `Are you sure to release service virtual port(s)? (y/n)[n]:`), or "".
func Confirmation(s string) string {
	text := strings.TrimRight(strings.ReplaceAll(s, "\r", ""), " ")
	i := strings.LastIndex(text, "\n")
	last := text[i+1:]
	if confirmRe.MatchString(last) {
		return strings.TrimSpace(last)
	}
	// A dialog the caller already answered (`...[n]:y`) still counts.
	for _, l := range strings.Split(text, "\n") {
		if confirmRe.MatchString(l) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
