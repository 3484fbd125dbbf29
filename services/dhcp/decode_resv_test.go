package dhcp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/shared/docobj"
)

// TestDecodeClientReservation: a client reservation as the document
// writes it, every field set, decodes without reflection (docobj.Flat
// takes every field: a field added to config.Client and not to
// setReservationField would fail here) and as encoding/json decodes it;
// so do nulls and empty addresses, and what the fast path leaves (a bad
// address, an escape, a number, an unknown name) decodes or is refused
// as encoding/json would.
func TestDecodeClientReservation(t *testing.T) {
	var full config.Client
	if err := json.Unmarshal([]byte(`{"mac":"02:00:00:00:00:01","ip":"10.0.0.1","ipv6":"2001:db8::1","hostname":"h","prefix6":"2001:db8:a000::/56"}`), &full); err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test's reservation leaves %s unset", v.Type().Field(i).Name)
		}
	}
	raw, _ := json.MarshalIndent(full, "        ", "    ")
	var c config.Client
	if !docobj.Flat(raw, func(name, text []byte, kind byte) bool { return setReservationField(&c, name, text, kind) }) {
		t.Fatalf("the fast path refused a reservation as the document writes it: %s", raw)
	}
	for _, doc := range []string{
		string(raw),
		`{"mac":"a","ip":"","ipv6":null,"hostname":null,"prefix6":""}`,
		`{"mac":"a","ip":"10.0.0.300"}`,
		`{"mac":"a","prefix6":"2001:db8::/129"}`,
		`{"mac":"a\u00e9","ip":"10.0.0.1"}`,
		`{"mac":"a","ip":true}`,
		`{"mac":"a","ip":1}`,
		`{"mac":"a","other":"x"}`,
		`{"Mac":"a"}`,
	} {
		var got, want config.Client
		gerr := decodeClientReservation([]byte(doc), &got)
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.DisallowUnknownFields()
		werr := dec.Decode(&want)
		if (gerr != nil) != (werr != nil) || (werr == nil && got != want) {
			t.Errorf("%s: %+v %v; encoding/json %+v %v", doc, got, gerr, want, werr)
		}
	}
}

// TestDecodeStoredReservation: a stored reservation decodes as
// json.Unmarshal decodes it, fast path or not: a field of a newer
// version or a name in another case is taken as encoding/json takes it,
// not refused as the document's import refuses it.
func TestDecodeStoredReservation(t *testing.T) {
	for _, doc := range []string{
		`{"mac":"02:00:00:00:00:01","ip":"10.0.0.1","ipv6":"2001:db8::1","hostname":"h","prefix6":"2001:db8:a000::/56"}`,
		`{"mac":"a","ip":"","ipv6":null,"hostname":null,"prefix6":""}`,
		`{"mac":"a","ip":"10.0.0.300"}`,
		`{"mac":"a","ip":1}`,
		`{"mac":"a","ip":"10.0.0.2","other":"x"}`,
		`{"Mac":"a","IP":"10.0.0.3"}`,
		`not json`,
	} {
		var got, want config.Client
		gerr := decodeStoredReservation([]byte(doc), &got)
		werr := json.Unmarshal([]byte(doc), &want)
		if (gerr != nil) != (werr != nil) || (werr == nil && got != want) {
			t.Errorf("%s: %+v %v; json.Unmarshal %+v %v", doc, got, gerr, want, werr)
		}
	}
}
