package docobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type elem struct {
	MAC  string `json:"mac"`
	Host string `json:"hostname,omitempty"`
	Tags []int  `json:"tags"`
}

type doc struct {
	Clients  []elem `json:"clients"`
	Services []elem `json:"services"`
}

// TestArrayWriterAsMarshalIndent: a document streamed is byte for byte the
// document rendered whole (versions saved before compare equal), for
// empty and full arrays and text json escapes.
func TestArrayWriterAsMarshalIndent(t *testing.T) {
	for _, d := range []doc{
		{Clients: []elem{}, Services: []elem{}},
		{Clients: []elem{{MAC: "a", Tags: []int{1, 2}}, {MAC: "b<&>", Host: "h"}}, Services: []elem{}},
		{Clients: []elem{}, Services: []elem{{MAC: "s", Tags: []int{}}}},
	} {
		want, _ := json.MarshalIndent(d, "", "    ")
		var buf bytes.Buffer
		a := NewArrayWriter(&buf)
		a.Field("clients")
		for _, e := range d.Clients {
			a.Element(e)
		}
		a.Field("services")
		for _, e := range d.Services {
			a.Element(e)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if buf.String() != string(want)+"\n" {
			t.Errorf("streamed:\n%s\nwhole:\n%s", buf.String(), want)
		}
	}
}

// TestElements: each element reaches its field's callback in order, as
// its text; an unknown field, an unknown element field, a broken or
// trailing text is an error.
func TestElements(t *testing.T) {
	var got []string
	decode := func(kind string) func(raw []byte) error {
		return func(raw []byte) error {
			var e elem
			err := Strict(raw, &e)
			got = append(got, kind+":"+e.MAC)
			return err
		}
	}
	each := map[string]func([]byte) error{"clients": decode("c"), "services": decode("s")}
	for _, good := range []string{
		`{"clients": [{"mac":"a"},{"mac":"b"}], "services": null}`,
		" \n{ \"clients\" :\t[ {\"mac\":\"a\", \"tags\": [1, 2]} ,\n{\"mac\":\"b\"} ] , \"services\": [ ] }\n",
		`{"clients": [{"mac":"a","hostname":"x]}\"{"}], "services": [], "clients": [{"mac":"b"}]}`,
		`{"cl\u0069ents": [{"mac":"a"},{"mac":"b"}]}`,
	} {
		// Whole, and a byte at a time (every buffer boundary crossed).
		for _, r := range []io.Reader{strings.NewReader(good), iotest.OneByteReader(strings.NewReader(good)), iotest.DataErrReader(strings.NewReader(good))} {
			got = nil
			if err := Elements(r, each); err != nil || strings.Join(got, ",") != "c:a,c:b" {
				t.Errorf("%q: %v %v", good, got, err)
			}
		}
	}
	got = nil
	if err := Elements(strings.NewReader(`{}`), each); err != nil || len(got) != 0 {
		t.Errorf("{}: %v %v", got, err)
	}
	for _, bad := range []string{
		`{"clients": [{"mac":"a"}], "other": []}`,
		`{"clients": [{"mac":"a","x":1}]}`,
		`{"clients": [{"mac":"a"}`,
		`{"clients": [{"mac":"a"}]} {}`,
		`{"clients": {"mac":"a"}}`,
		`{"clients": [{"mac":"a"},]}`,
		`{"clients": [{"mac":"a"}],}`,
		`{"clients": [{"mac":"a"} {"mac":"b"}]}`,
		`{"clients": [{"mac":"a}]}`,
		`{"clients": [1]}`,
		`{"clients": nul}`,
		`{"clients" [{"mac":"a"}]}`,
		`{clients: []}`,
		`[]`,
		``,
	} {
		if err := Elements(strings.NewReader(bad), each); err == nil {
			t.Errorf("%q: no error", bad)
		}
		if err := Elements(iotest.OneByteReader(strings.NewReader(bad)), each); err == nil {
			t.Errorf("%q a byte at a time: no error", bad)
		}
	}
}

// TestElementsReadFailure: a failure to read the document is Elements'
// error, also half way through an element.
func TestElementsReadFailure(t *testing.T) {
	broken := errors.New("object store gone")
	for _, text := range []string{`{"clients": [{"mac":"a"},{"ma`, `{"clients": [{"mac":"a"}`, `{"clients": [1`} {
		r := io.MultiReader(strings.NewReader(text), iotest.ErrReader(broken))
		err := Elements(r, map[string]func([]byte) error{"clients": func([]byte) error { return nil }})
		if !errors.Is(err, broken) {
			t.Errorf("%q then a failure: %v", text, err)
		}
	}
}

// flatElem is every kind of field Flat hands to its callback.
type flatElem struct {
	MAC  string  `json:"mac"`
	Plan *string `json:"plan"`
	On   bool    `json:"on"`
}

func (e *flatElem) set(name, text []byte, kind byte) bool {
	switch string(name) {
	case "mac":
		switch kind {
		case '"':
			e.MAC = string(text)
		case 'n':
		default:
			return false
		}
	case "plan":
		switch kind {
		case '"':
			p := string(text)
			e.Plan = &p
		case 'n':
			e.Plan = nil
		default:
			return false
		}
	case "on":
		switch kind {
		case 't', 'f':
			e.On = kind == 't'
		case 'n':
		default:
			return false
		}
	default:
		return false
	}
	return true
}

// TestFlat: what Flat takes decodes as Strict decodes it, and what it
// leaves (escapes, numbers, nested values, names in another case, bytes
// that are not UTF-8, broken text) it reports, so that Strict decodes it
// or refuses it.
func TestFlat(t *testing.T) {
	for _, c := range []struct {
		raw  string
		flat bool
	}{
		{`{"mac":"a","plan":"gold","on":true}`, true},
		{" {\n \"mac\" : \"a b\" ,\t\"plan\": null, \"on\": false }\n", true},
		{`{}`, true},
		{`{"mac":null,"on":null}`, true},
		{`{"plan":"x","plan":null,"mac":"a","mac":"b"}`, true},
		{`{"mac":"Müller"}`, true},
		{`{"mac":"a\"b"}`, false},
		{`{"mac":"a\u00e9"}`, false},
		{`{"m\u0061c":"a"}`, false},
		{`{"MAC":"a"}`, false},
		{`{"mac":"\xff"}`, false},
		{"{\"mac\":\"a\xffb\"}", false},
		{`{"on":1}`, false},
		{`{"on":"true"}`, false},
		{`{"mac":true}`, false},
		{`{"plan":{"a":1}}`, false},
		{`{"other":"x"}`, false},
		{`{"mac":"a",}`, false},
		{`{"mac":"a"`, false},
		{`{"mac" "a"}`, false},
		{`{"mac":"a"} x`, false},
		{`{"on":truex}`, false},
		{`{"on":nul}`, false},
		{`{"mac":"a` + "\t" + `"}`, false},
		{`["mac"]`, false},
		{``, false},
	} {
		var f flatElem
		ok := Flat([]byte(c.raw), f.set)
		if ok != c.flat {
			t.Errorf("%q: Flat %v, want %v", c.raw, ok, c.flat)
			continue
		}
		var s flatElem
		err := Strict([]byte(c.raw), &s)
		if ok {
			fj, _ := json.Marshal(f)
			sj, _ := json.Marshal(s)
			if err != nil || string(fj) != string(sj) {
				t.Errorf("%q: Flat %s, Strict %s %v", c.raw, fj, sj, err)
			}
		}
	}
}
