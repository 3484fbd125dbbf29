package gateway

import (
	"net/http"
	"slices"

	"routerd.dev/proto/api"
)

// mount puts every REST form of the operation table on the route tree and
// collects the action names: the whole API comes from api.Table, so the
// REST and the action form of an operation reach the same subject and the
// same code, and an operation that is not in the table is not served.
func (g *Gateway) mount(table []api.Operation) error {
	taken := map[string][]string{}
	var anyOther []struct {
		path string
		m    *api.Meta
	}
	for _, op := range table {
		m := op.Describe()
		for _, f := range m.REST {
			if f.Method == api.AnyMethod {
				anyOther = append(anyOther, struct {
					path string
					m    *api.Meta
				}{f.Path, m})
				continue
			}
			if slices.Contains(taken[f.Path], f.Method) {
				return errorf("%s %s routed twice", f.Method, f.Path)
			}
			taken[f.Path] = append(taken[f.Path], f.Method)
			g.mux.Method(f.Method, f.Path, g.restHandler(m))
			g.forms = append(g.forms, f.Method+" "+f.Path)
		}
		if m.Action != "" {
			if _, dup := g.actions[m.Action]; dup {
				return errorf("action %s routed twice", m.Action)
			}
			g.actions[m.Action] = m
		}
	}
	for _, a := range anyOther {
		for _, method := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			if !slices.Contains(taken[a.path], method) {
				g.mux.Method(method, a.path, g.restHandler(a.m))
			}
		}
	}
	return nil
}

// actionMethod is the REST method an action form carries in its envelope:
// its operation's first REST form's, or GET for a read and POST otherwise.
func actionMethod(m *api.Meta) string {
	for _, f := range m.REST {
		if f.Method != api.AnyMethod {
			return f.Method
		}
	}
	if m.Read {
		return http.MethodGet
	}
	return http.MethodPost
}
