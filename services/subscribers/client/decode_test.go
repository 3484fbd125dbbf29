package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/shared/docobj"
)

// TestDecodeClient: a client as the document writes it, every field of
// api.Client set, decodes without reflection (docobj.Flat takes every
// field: a field added to api.Client and not to setClientField would
// fail here) and as encoding/json decodes it; so do nulls, and what the
// fast path leaves (escapes, a number, an unknown or differently cased
// name) decodes or is refused as encoding/json would.
func TestDecodeClient(t *testing.T) {
	s := func(v string) *string { return &v }
	full := api.Client{MAC: "02:00:00:00:00:01", IP: "10.0.0.1", IPv6: s("2001:db8::1"), Plan: s("gold"), Suspended: true,
		AutoSuspended: true, Expires: s("2026-12-31"), Hostname: "h", Network: s("10.0.0.0/24"), Network6: s("2001:db8::/64"),
		Iface: "eth1", Gateway: "10.0.0.254", Comment: "fibre, Müller", Created: "2026-11-24 10:00:00"}
	raw, _ := json.MarshalIndent(full, "        ", "    ")
	// Every field of api.Client is in the text with a value that is not
	// its zero (a field missed by setClientField would make Flat refuse).
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test's client leaves %s unset", v.Type().Field(i).Name)
		}
	}
	var c api.Client
	if !docobj.Flat(raw, func(name, text []byte, kind byte) bool { return setClientField(&c, name, text, kind) }) {
		t.Fatalf("the fast path refused a client as the document writes it: %s", raw)
	}
	for _, doc := range []string{
		string(raw),
		`{"mac":"a","ip":"1.2.3.4","ipv6":null,"plan":null,"expires":null,"network":null,"network6":null,"suspended":false,"auto_suspended":false}`,
		`{"mac":null,"suspended":null,"plan":"x","plan":null}`,
		`{"mac":"a\u00e9","comment":"say \"hi\""}`,
		`{"MAC":"a"}`,
		`{"mac":"a","other":1}`,
		`{"mac":"a","suspended":1}`,
		`{"mac":"a","plan":true}`,
		`{"mac":"a"`,
	} {
		var got, want api.Client
		gerr := decodeClient([]byte(doc), &got)
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.DisallowUnknownFields()
		werr := dec.Decode(&want)
		if (gerr != nil) != (werr != nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: %+v %v; encoding/json %+v %v", doc, got, gerr, want, werr)
		}
	}
}
