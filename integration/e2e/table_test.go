package e2e

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"routerd.dev/proto/api"
)

// invalid returns arguments that break the first rule of m's request, and
// the field a 400 must name; ok is false for a request without rules.
// Fields are checked in order, so the first field with a rule is the one
// that fails.
func invalid(m *api.Meta) (args map[string]string, field string, ok bool) {
	for _, f := range m.Request().Fields {
		switch {
		case f.Required:
			return map[string]string{}, f.Name, true
		case f.Kind == api.Int || f.Kind == api.Float:
			return map[string]string{f.Name: "not-a-number"}, f.Name, true
		case f.Kind == api.Bool:
			return map[string]string{f.Name: "maybe"}, f.Name, true
		case len(f.Enum) > 0:
			return map[string]string{f.Name: "no-such-value"}, f.Name, true
		case f.Format != "":
			return map[string]string{f.Name: "not-a-" + f.Format}, f.Name, true
		case f.Pattern != nil:
			return map[string]string{f.Name: "!! not this !!"}, f.Name, true
		case f.MaxLen > 0:
			return map[string]string{f.Name: strings.Repeat("x", f.MaxLen+1)}, f.Name, true
		}
	}
	return nil, "", false
}

// Every operation of the table, driven through the gateway in both its
// REST and its action form with a request that breaks a field rule, is
// answered 400 naming that field, by the service that owns it.
func TestEveryOperationRefusesInvalidInput(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end: routerd --lab needs root to create network namespaces")
	}
	r := startLab(t, binary(t), uniquePrefix(), t.TempDir())
	checked := 0
	for _, op := range api.Table {
		m := op.Describe()
		args, field, ok := invalid(m)
		if !ok || m.Internal() {
			continue
		}
		for _, f := range m.REST {
			if f.Method == api.AnyMethod {
				continue
			}
			path := f.Path
			for _, p := range api.PathParams(f.Path) {
				if p == field {
					path = "" // an empty path segment is another route
				}
				path = strings.ReplaceAll(path, "{"+p+"}", url.PathEscape(args[p]))
			}
			if path == "" {
				continue
			}
			var st int
			var body map[string]any
			if f.Method == "GET" {
				q := url.Values{}
				for k, v := range args {
					q.Set(k, v)
				}
				st, body = r.call(f.Method, path+"?"+q.Encode(), nil)
			} else {
				st, body = r.call(f.Method, path, args)
			}
			if st != 400 || body["field"] != field {
				t.Errorf("%s %s %v: %d %v, want 400 naming %s", f.Method, path, args, st, body, field)
			}
			checked++
		}
		if m.Action != "" {
			q := url.Values{"action": {m.Action}}
			for k, v := range args {
				q.Set(k, v)
			}
			method := "GET"
			if m.ActionPOSTOnly { // config-save: POST only, GET is 405
				method = "POST"
			}
			st, body := r.call(method, "/api?"+q.Encode(), nil)
			if st != 400 || body["field"] != field {
				t.Errorf("action %s %v: %d %v, want 400 naming %s", m.Action, args, st, body, field)
			}
			checked++
		}
	}
	t.Logf("%d forms checked", checked)
	if checked == 0 {
		t.Fatal("no operation has a rule to break")
	}
}
