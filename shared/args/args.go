// Package args reads the arguments of an operation. They arrive as one JSON
// object: the body of a REST call, or the query of an action call with every
// value a string. Getters therefore accept a number or boolean either as JSON
// or as its text, so both forms reach the same validation.
package args

import (
	"encoding/json"
	"strconv"
	"strings"

	"routerd.dev/shared/apierr"
)

// Args is a decoded argument object.
type Args map[string]json.RawMessage

// Parse decodes raw; anything that is not a JSON object counts as empty,
// as the spec says for bodies.
func Parse(raw []byte) Args {
	a := Args{}
	if len(raw) == 0 {
		return a
	}
	if err := json.Unmarshal(raw, &a); err != nil || a == nil {
		return Args{}
	}
	return a
}

// Has reports whether name was sent (even as null or empty).
func (a Args) Has(name string) bool { _, ok := a[name]; return ok }

// String returns name as a string; numbers and booleans are given as their
// text, null and absent as "".
func (a Args) String(name string) string {
	raw, ok := a[name]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	t := strings.TrimSpace(string(raw))
	if t == "null" {
		return ""
	}
	return t
}

// Int returns name as an integer. ok is false when absent or empty; err is
// an apierr for a value that is not a whole number.
func (a Args) Int(name string) (n int64, ok bool, err error) {
	raw, present := a[name]
	if !present {
		return 0, false, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		if f != float64(int64(f)) {
			return 0, true, apierr.Invalid(name, "%s must be an integer", name)
		}
		return int64(f), true, nil
	}
	s := a.String(name)
	if s == "" {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if perr != nil {
		return 0, true, apierr.Invalid(name, "%s must be an integer, got %q", name, s)
	}
	return n, true, nil
}

// Bool returns name as a boolean, accepting true/false, 1/0, on/off, yes/no.
func (a Args) Bool(name string) (b bool, ok bool, err error) {
	raw, present := a[name]
	if !present {
		return false, false, nil
	}
	if json.Unmarshal(raw, &b) == nil {
		return b, true, nil
	}
	s := strings.ToLower(a.String(name))
	switch s {
	case "":
		return false, false, nil
	case "1", "true", "on", "yes":
		return true, true, nil
	case "0", "false", "off", "no":
		return false, true, nil
	}
	return false, true, apierr.Invalid(name, "%s must be a boolean (true/false, 1/0, on/off, yes/no), got %q", name, s)
}

// Decode unmarshals the whole object into v (for services with typed bodies).
func (a Args) Decode(v any) error {
	raw, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return apierr.BadRequest("invalid request: %v", err)
	}
	return nil
}
