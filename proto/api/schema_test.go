package api_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"routerd.dev/proto/api"
)

type sample struct {
	Name     string         `json:"name" api:"required" pattern:"^[a-z]{1,8}$" hint:"1-8 lower-case letters"`
	N        int            `json:"n" api:"min=1,max=10,default=3"`
	Big      *int64         `json:"big" api:"max=100000"`
	On       bool           `json:"on"`
	Mode     string         `json:"mode" api:"enum=fast|slow"`
	Password string         `json:"password" api:"alias=pass,notrim"`
	MAC      string         `json:"mac" api:"format=mac"`
	IPs      []string       `json:"ips" api:"format=ip"`
	Comment  string         `json:"comment" api:"maxlen=5"`
	Params   map[string]any `json:"params"`
}

var sampleOp = api.Define[sample, api.None](api.Meta{Service: "test", Name: "samples.put"})

func decode(t *testing.T, args map[string]any) (sample, error) {
	t.Helper()
	raw := map[string]json.RawMessage{}
	for k, v := range args {
		raw[k], _ = json.Marshal(v)
	}
	var s sample
	err := sampleOp.Decode(raw, &s)
	return s, err
}

func i64(n int64) *int64 { return &n }

// The JSON body and the action form's strings decode to the same request.
func TestDecodeBothForms(t *testing.T) {
	want := sample{Name: "gold", N: 7, Big: i64(500), On: true, Mode: "fast", Password: " pw ", MAC: "02:aa:bb:cc:dd:ee",
		IPs: []string{"192.0.2.1", "2001:db8::1"}, Params: map[string]any{"a": float64(1)}}
	body, err := decode(t, map[string]any{"name": "gold", "n": 7, "big": 500, "on": true, "mode": "fast", "password": " pw ",
		"mac": "02:aa:bb:cc:dd:ee", "ips": []string{"192.0.2.1", "2001:db8::1"}, "params": map[string]any{"a": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, body) {
		t.Errorf("body form:\n got %+v\nwant %+v", body, want)
	}
	action, err := decode(t, map[string]any{"name": " gold ", "n": "7", "big": "500", "on": "yes", "mode": "fast", "pass": " pw ",
		"mac": "02:aa:bb:cc:dd:ee", "ips": "192.0.2.1, 2001:db8::1", "params": `{"a":1}`})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, action) {
		t.Errorf("action form:\n got %+v\nwant %+v", action, want)
	}
}

func TestDecodeDefaultsAndAbsence(t *testing.T) {
	got, err := decode(t, map[string]any{"name": "x", "mode": "", "big": nil})
	if err != nil {
		t.Fatal(err)
	}
	if want := (sample{Name: "x", N: 3}); !reflect.DeepEqual(want, got) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestDecodeRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  map[string]any
		field string
		text  string
	}{
		{"missing", map[string]any{}, "name", "name is required: 1-8 lower-case letters"},
		{"empty", map[string]any{"name": "  "}, "name", "name is required"},
		{"pattern", map[string]any{"name": "Gold"}, "name", `invalid name "Gold": 1-8 lower-case letters`},
		{"not an integer", map[string]any{"name": "x", "n": "many"}, "n", `n must be an integer, got "many"`},
		{"fraction", map[string]any{"name": "x", "n": 1.5}, "n", "n must be an integer"},
		{"below", map[string]any{"name": "x", "n": 0}, "n", "n 0 out of range 1-10"},
		{"above", map[string]any{"name": "x", "big": 100001}, "big", "big 100001 out of range at most 100000"},
		{"bool", map[string]any{"name": "x", "on": "maybe"}, "on", "on must be a boolean"},
		{"enum", map[string]any{"name": "x", "mode": "warp"}, "mode", `mode must be one of fast, slow, got "warp"`},
		{"mac", map[string]any{"name": "x", "mac": "02:aa"}, "mac", `invalid mac "02:aa"`},
		{"ip in list", map[string]any{"name": "x", "ips": "192.0.2.1,nope"}, "ips", `invalid ips "nope"`},
		{"too long", map[string]any{"name": "x", "comment": "abcdef"}, "comment", "comment longer than 5 characters"},
		{"bad json", map[string]any{"name": "x", "params": "{"}, "params", "params is not valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(t, tc.args)
			var fe *api.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a FieldError", err)
			}
			if fe.Field != tc.field || !strings.HasPrefix(fe.Message, tc.text) {
				t.Errorf("got %s: %q, want %s: %q...", fe.Field, fe.Message, tc.field, tc.text)
			}
		})
	}
}

// Cross-field rules run after the field rules.
func TestValidateMethod(t *testing.T) {
	var r api.RouteAdd
	err := api.RoutesCreate.Decode(map[string]json.RawMessage{"prefix": json.RawMessage(`"10.0.0.0/8"`)}, &r)
	var fe *api.FieldError
	if !errors.As(err, &fe) || fe.Field != "via" {
		t.Fatalf("route without a next hop: %v, want a FieldError on via", err)
	}
}

// Every subject, action and REST form appears once in the table.
func TestTableIsConsistent(t *testing.T) {
	subjects, actions, forms := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, op := range api.Table {
		m := op.Describe()
		if subjects[m.Subject()] {
			t.Errorf("subject %s twice", m.Subject())
		}
		subjects[m.Subject()] = true
		if m.Action != "" {
			if actions[m.Action] {
				t.Errorf("action %s twice", m.Action)
			}
			actions[m.Action] = true
		}
		for _, f := range m.REST {
			k := f.Method + " " + f.Path
			if forms[k] {
				t.Errorf("%s twice", k)
			}
			forms[k] = true
			for _, p := range api.PathParams(f.Path) {
				if m.Request().Field(p) == nil {
					t.Errorf("%s: path parameter %s is no request field", k, p)
				}
			}
		}
		if m.Summary == "" {
			t.Errorf("%s has no summary", m.Subject())
		}
	}
}
