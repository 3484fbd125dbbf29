package parse

import (
	"regexp"
	"strings"
)

var (
	errLineRe = regexp.MustCompile(`^\s*(% ?(Unknown command|Parameter error|Incomplete command|Too many parameters|Ambiguous command|Wrong parameter)[^\n]*|Failure:.*|Error:.*|Configuration console time out.*)$`)
	promptRe  = regexp.MustCompile(`^\s*[A-Za-z0-9_\-.]+(\([A-Za-z0-9_\-/.]+\))?[>#]`)
)

// Error returns the OLT's error text in a reply, or "" when the reply holds
// none. A `Failure:` message the OLT wrapped onto following lines (as in
// `Failure: This configured object has some service virtual\n  ports`) is
// joined back into one line.
func Error(raw string) string {
	ls := lines(raw)
	for i, l := range ls {
		if !errLineRe.MatchString(l) {
			continue
		}
		msg := strings.TrimSpace(l)
		if strings.HasPrefix(msg, "Failure:") || strings.HasPrefix(msg, "Error:") {
			for j := i + 1; j < len(ls); j++ {
				n := ls[j]
				if promptRe.MatchString(n) || errLineRe.MatchString(n) || strings.TrimSpace(n) == "" ||
					!strings.HasPrefix(n, "  ") || strings.Contains(n, ":") {
					break
				}
				msg += " " + strings.TrimSpace(n)
			}
		}
		return msg
	}
	return ""
}

// Errors returns every error text found in raw, one per line; used on
// catalogues and whole sessions.
func Errors(raw string) []string {
	var out []string
	for _, l := range lines(raw) {
		l = strings.Trim(l, " |`")
		if i := strings.Index(l, "Failure:"); i >= 0 {
			l = l[i:]
			if j := strings.Index(l, "`"); j > 0 {
				l = l[:j]
			}
		}
		if errLineRe.MatchString(l) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}
