package docobj

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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

// TestElements: each element reaches its field's callback in order; an
// unknown field, an unknown element field, a broken or trailing text is
// an error.
func TestElements(t *testing.T) {
	var got []string
	each := map[string]func(*json.Decoder) error{
		"clients": func(dec *json.Decoder) error {
			var e elem
			err := dec.Decode(&e)
			got = append(got, "c:"+e.MAC)
			return err
		},
		"services": func(dec *json.Decoder) error {
			var e elem
			err := dec.Decode(&e)
			got = append(got, "s:"+e.MAC)
			return err
		},
	}
	if err := Elements(strings.NewReader(`{"clients": [{"mac":"a"},{"mac":"b"}], "services": null}`), each); err != nil || strings.Join(got, ",") != "c:a,c:b" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{
		`{"clients": [{"mac":"a"}], "other": []}`,
		`{"clients": [{"mac":"a","x":1}]}`,
		`{"clients": [{"mac":"a"}`,
		`{"clients": [{"mac":"a"}]} {}`,
		`{"clients": {"mac":"a"}}`,
		`[]`,
		``,
	} {
		if err := Elements(strings.NewReader(bad), each); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
