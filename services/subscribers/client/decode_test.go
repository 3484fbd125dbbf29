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

// TestEachInDocumentRefuses: a document holding the same MAC (in another
// form), address, IPv6 address or hostname (in another case) twice, or a
// hostname the rule refuses, is refused naming what and the clients;
// distinct ones pass.
func TestEachInDocumentRefuses(t *testing.T) {
	doc := func(clients ...string) string { return `{"clients": [` + strings.Join(clients, ",") + `]}` }
	a := `{"mac":"02:00:00:00:00:01","ip":"10.0.0.1","ipv6":"2001:db8::1","hostname":"Cpe-1"}`
	for _, c := range []struct{ doc, want string }{
		{doc(a, `{"mac":"02-00-00-00-00-01","ip":"10.0.0.2","hostname":"cpe-2"}`), "mac 02:00:00:00:00:01 also held by client 1"},
		{doc(a, `{"mac":"02:00:00:00:00:02","ip":"10.0.0.1","hostname":"cpe-2"}`), "ip 10.0.0.1 also held by client 1"},
		{doc(a, `{"mac":"02:00:00:00:00:02","ip":"10.0.0.2","ipv6":"2001:db8:0::1","hostname":"cpe-2"}`), "ipv6 2001:db8::1 also held by client 1"},
		{doc(a, `{"mac":"02:00:00:00:00:02","ip":"10.0.0.2","hostname":"CPE-1"}`), "hostname cpe-1 also held by client 1"},
		{doc(a, `{"mac":"02:00:00:00:00:02","ip":"10.0.0.2","hostname":"cpe_2"}`), `invalid hostname "cpe_2"`},
		{doc(a, `{"mac":"02:00:00:00:00:02","ip":"10.0.0.2","hostname":""}`), `invalid hostname ""`},
		{doc(a, `{"mac":"02:00:00:00:00:02","ip":"10.0.0.2","hostname":"`+strings.Repeat("h", 64)+`"}`), "invalid hostname"},
		{doc(a, `{"mac":"02:00:00:00:00:02","ip":"10.0.0.2","hostname":"cpé"}`), "invalid hostname"},
		{doc(a, `{"mac":"02:00:00:00:00:02","ip":"10.0.0.2","hostname":"`+strings.Repeat("h", 63)+`"}`), ""},
	} {
		n := 0
		err := EachInDocument(strings.NewReader(c.doc), nil, func(*api.Client) error { n++; return nil })
		switch {
		case c.want == "" && (err != nil || n != 2):
			t.Errorf("%s: %d clients, %v", c.doc, n, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
}
