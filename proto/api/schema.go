package api

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is how a request field is read from its argument.
type Kind int

// Field kinds.
const (
	String  Kind = iota // a JSON string; numbers and booleans as their text
	Int                 // a whole JSON number, or its text
	Bool                // a JSON boolean, or true/false, 1/0, on/off, yes/no
	Float               // a JSON number, or its text
	Strings             // a JSON array of strings, or one comma-separated string
	JSON                // anything else: decoded from JSON as it is
)

// Field is one request field with its rules, parsed from struct tags once
// when the operation is defined.
type Field struct {
	// Name is the JSON name; Aliases are other names accepted for it
	// (e.g. pass for password).
	Name    string
	Aliases []string
	Kind    Kind
	// Ptr says the Go field is a pointer: nil when the argument was absent.
	Ptr      bool
	Required bool
	// Min and Max bound a number (nil: unbounded).
	Min, Max *float64
	// MinLen and MaxLen bound a string in characters (0: unbounded).
	MinLen, MaxLen int
	Enum           []string
	Pattern        *regexp.Regexp
	// Format is one of Formats.
	Format  string
	Default string
	// NoTrim keeps leading and trailing spaces (passwords).
	NoTrim bool
	// Doc describes the field; Hint says what a valid value looks like in
	// the error for one that is not; Example is for the reference.
	Doc, Hint, Example string
	Type               reflect.Type
	index              []int
}

// Formats checked by format=: what each accepts.
var Formats = map[string]string{
	"ip":   "an IPv4 or IPv6 address",
	"ipv4": "an IPv4 address",
	"ipv6": "an IPv6 address",
	"cidr": "an address or an address/prefix-length",
	"mac":  "a MAC address (aa:bb:cc:dd:ee:ff, aa-bb-..., or aabb.ccdd.eeff)",
}

// Schema is the field list of a request type.
type Schema struct {
	Type   reflect.Type
	Fields []Field
}

// Field returns the field of that JSON name, or nil.
func (s *Schema) Field(name string) *Field {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return &s.Fields[i]
		}
	}
	return nil
}

func schemaOf(t reflect.Type) (*Schema, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("request type %s is not a struct", t)
	}
	s := &Schema{Type: t}
	if err := s.collect(t, nil); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Schema) collect(t reflect.Type, index []int) error {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			if err := s.collect(sf.Type, idx); err != nil {
				return err
			}
			continue
		}
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f, err := parseField(name, sf)
		if err != nil {
			return fmt.Errorf("field %s: %w", name, err)
		}
		f.index = idx
		s.Fields = append(s.Fields, f)
	}
	return nil
}

func parseField(name string, sf reflect.StructField) (Field, error) {
	f := Field{Name: name, Type: sf.Type, Doc: sf.Tag.Get("doc"), Hint: sf.Tag.Get("hint"), Example: sf.Tag.Get("example")}
	t := sf.Type
	if t.Kind() == reflect.Pointer {
		f.Ptr, t = true, t.Elem()
	}
	switch {
	case t.Kind() == reflect.String:
		f.Kind = String
	case t.Kind() == reflect.Bool:
		f.Kind = Bool
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		f.Kind = Int
	case t.Kind() == reflect.Float64:
		f.Kind = Float
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		f.Kind = Strings
	default:
		f.Kind = JSON
	}
	if p := sf.Tag.Get("pattern"); p != "" {
		re, err := regexp.Compile(p)
		if err != nil {
			return f, err
		}
		f.Pattern = re
	}
	for _, rule := range strings.Split(sf.Tag.Get("api"), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(rule), "=")
		var err error
		switch k {
		case "":
		case "required":
			f.Required = true
		case "notrim":
			f.NoTrim = true
		case "min", "max":
			var n float64
			if n, err = strconv.ParseFloat(v, 64); err == nil {
				if k == "min" {
					f.Min = &n
				} else {
					f.Max = &n
				}
			}
		case "minlen":
			f.MinLen, err = strconv.Atoi(v)
		case "maxlen":
			f.MaxLen, err = strconv.Atoi(v)
		case "enum":
			f.Enum = strings.Split(v, "|")
		case "alias":
			f.Aliases = append(f.Aliases, strings.Split(v, "|")...)
		case "format":
			if _, ok := Formats[v]; !ok {
				err = fmt.Errorf("unknown format %q", v)
			}
			f.Format = v
		case "default":
			f.Default = v
		default:
			err = fmt.Errorf("unknown rule %q", k)
		}
		if err != nil {
			return f, fmt.Errorf("rule %q: %w", rule, err)
		}
	}
	return f, nil
}

// FieldError is a request field that breaks its rules. The bus adapter
// answers it as a 400 naming the field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Message }

func invalid(field, format string, a ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, a...)}
}

// decode fills v (a struct of the schema's type) from args.
func (s *Schema) decode(args map[string]json.RawMessage, v reflect.Value) error {
	for i := range s.Fields {
		f := &s.Fields[i]
		raw, ok := args[f.Name]
		for _, a := range f.Aliases {
			if ok && !isEmpty(raw) {
				break
			}
			raw, ok = args[a]
		}
		if ok && isEmpty(raw) {
			ok = false
		}
		if !ok && f.Default != "" {
			raw, ok = json.RawMessage(strconv.Quote(f.Default)), true
		}
		if !ok {
			if f.Required {
				return invalid(f.Name, "%s is required%s", f.Name, f.hintSuffix())
			}
			continue
		}
		dst := v.FieldByIndex(f.index)
		if f.Ptr {
			p := reflect.New(f.Type.Elem())
			dst.Set(p)
			dst = p.Elem()
		}
		if err := f.read(raw, dst); err != nil {
			return err
		}
		if err := f.check(dst); err != nil {
			return err
		}
	}
	if c, ok := v.Addr().Interface().(interface{ Validate() error }); ok {
		return c.Validate()
	}
	return nil
}

// isEmpty is an argument that counts as not sent: null, or an empty string
// (an action form's `&x=`).
func isEmpty(raw json.RawMessage) bool {
	t := strings.TrimSpace(string(raw))
	return t == "" || t == "null" || t == `""`
}

// text is the argument as a string: a JSON string's content, or the raw
// JSON of a number or boolean.
func text(raw json.RawMessage) (string, bool) {
	// A plain JSON string (no escapes, no control characters, valid
	// UTF-8) is its bytes between the quotes: most arguments are, and
	// json.Unmarshal's reflection was most of a small request's decoding.
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		inner := raw[1 : n-1]
		plain := utf8.Valid(inner)
		for _, c := range inner {
			if c == '\\' || c == '"' || c < 0x20 {
				plain = false
				break
			}
		}
		if plain {
			return string(inner), true
		}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return strings.TrimSpace(string(raw)), false
}

func (f *Field) read(raw json.RawMessage, dst reflect.Value) error {
	switch f.Kind {
	case String:
		s, _ := text(raw)
		if !f.NoTrim {
			s = strings.TrimSpace(s)
		}
		if s == "" && f.Required {
			return invalid(f.Name, "%s is required%s", f.Name, f.hintSuffix())
		}
		dst.SetString(s)
	case Int:
		s, _ := text(raw)
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			fl, ferr := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if ferr != nil || fl != float64(int64(fl)) {
				return invalid(f.Name, "%s must be an integer, got %s", f.Name, quoteShort(s))
			}
			n = int64(fl)
		}
		if dst.OverflowInt(n) {
			return invalid(f.Name, "%s %d is out of range", f.Name, n)
		}
		dst.SetInt(n)
	case Float:
		s, _ := text(raw)
		n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return invalid(f.Name, "%s must be a number, got %s", f.Name, quoteShort(s))
		}
		dst.SetFloat(n)
	case Bool:
		s, _ := text(raw)
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "1", "true", "on", "yes":
			dst.SetBool(true)
		case "0", "false", "off", "no":
			dst.SetBool(false)
		default:
			return invalid(f.Name, "%s must be a boolean (true/false, 1/0, on/off, yes/no), got %s", f.Name, quoteShort(s))
		}
	case Strings:
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			s, isString := text(raw)
			if !isString {
				return invalid(f.Name, "%s must be a list of strings or one comma-separated string", f.Name)
			}
			for _, p := range strings.Split(s, ",") {
				if p = strings.TrimSpace(p); p != "" {
					list = append(list, p)
				}
			}
		}
		dst.Set(reflect.ValueOf(list).Convert(dst.Type()))
	case JSON:
		// The action form sends everything as a string: a JSON document
		// inside it is read as the document.
		if s, isString := text(raw); isString && dst.Kind() != reflect.String {
			raw = json.RawMessage(s)
		}
		if err := json.Unmarshal(raw, dst.Addr().Interface()); err != nil {
			return invalid(f.Name, "%s is not valid: %v", f.Name, err)
		}
	}
	return nil
}

func (f *Field) check(v reflect.Value) error {
	switch f.Kind {
	case Int, Float:
		var n float64
		if f.Kind == Int {
			n = float64(v.Int())
		} else {
			n = v.Float()
		}
		if f.Min != nil && n < *f.Min || f.Max != nil && n > *f.Max {
			return invalid(f.Name, "%s %v out of range %s", f.Name, n, f.rangeText())
		}
	case String:
		s := v.String()
		if s == "" {
			return nil
		}
		n := utf8.RuneCountInString(s)
		if f.MaxLen > 0 && n > f.MaxLen {
			return invalid(f.Name, "%s longer than %d characters", f.Name, f.MaxLen)
		}
		if f.MinLen > 0 && n < f.MinLen {
			return invalid(f.Name, "%s shorter than %d characters", f.Name, f.MinLen)
		}
		if len(f.Enum) > 0 && !contains(f.Enum, s) {
			return invalid(f.Name, "%s must be one of %s, got %s", f.Name, strings.Join(f.Enum, ", "), quoteShort(s))
		}
		if f.Pattern != nil && !f.Pattern.MatchString(s) {
			return invalid(f.Name, "invalid %s %s%s", f.Name, quoteShort(s), f.hintSuffix())
		}
		if f.Format != "" && !validFormat(f.Format, s) {
			return invalid(f.Name, "invalid %s %s: want %s", f.Name, quoteShort(s), Formats[f.Format])
		}
	case Strings:
		if f.Required && v.Len() == 0 {
			return invalid(f.Name, "%s is required%s", f.Name, f.hintSuffix())
		}
		for i := 0; i < v.Len(); i++ {
			s := v.Index(i).String()
			if len(f.Enum) > 0 && !contains(f.Enum, s) {
				return invalid(f.Name, "%s: each must be one of %s, got %s", f.Name, strings.Join(f.Enum, ", "), quoteShort(s))
			}
			if f.Format != "" && !validFormat(f.Format, s) {
				return invalid(f.Name, "invalid %s %s: want %s", f.Name, quoteShort(s), Formats[f.Format])
			}
			if f.Pattern != nil && !f.Pattern.MatchString(s) {
				return invalid(f.Name, "invalid %s %s%s", f.Name, quoteShort(s), f.hintSuffix())
			}
		}
	}
	return nil
}

func (f *Field) rangeText() string {
	switch {
	case f.Min != nil && f.Max != nil:
		return fmt.Sprintf("%v-%v", *f.Min, *f.Max)
	case f.Min != nil:
		return fmt.Sprintf("at least %v", *f.Min)
	default:
		return fmt.Sprintf("at most %v", *f.Max)
	}
}

func (f *Field) hintSuffix() string {
	if f.Hint == "" {
		return ""
	}
	return ": " + f.Hint
}

func validFormat(format, s string) bool {
	switch format {
	case "ip", "ipv4", "ipv6":
		a, err := netip.ParseAddr(s)
		return err == nil && a.Zone() == "" && (format == "ip" || (format == "ipv4") == a.Is4())
	case "cidr":
		if _, err := netip.ParsePrefix(s); err == nil {
			return true
		}
		_, err := netip.ParseAddr(s)
		return err == nil
	case "mac":
		return macPattern.MatchString(s)
	}
	return false
}

var macPattern = regexp.MustCompile(`^(?i:[0-9a-f]{2}(:[0-9a-f]{2}){5}|[0-9a-f]{2}(-[0-9a-f]{2}){5}|[0-9a-f]{4}\.[0-9a-f]{4}\.[0-9a-f]{4}|[0-9a-f]{12})$`)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// quoteShort quotes a value for an error, cut to 64 characters so an
// error never echoes a whole oversized argument.
func quoteShort(s string) string {
	if utf8.RuneCountInString(s) > 64 {
		s = string([]rune(s)[:64]) + "..."
	}
	return strconv.Quote(s)
}
