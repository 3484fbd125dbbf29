package gateway_test

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"routerd.dev/gateway"
)

// The API reference and the route table must agree both ways.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	raw, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Action string `json:"x-action"`
		} `json:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{} // "GET /status" -> action
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+path] = op.Action
		}
	}
	routed := map[string]bool{"GET /api": true}
	for _, r := range gateway.Routes {
		if r.Method == gateway.AnyOther {
			continue
		}
		form := r.Method + " " + r.Pattern
		routed[form] = true
		action, ok := documented[form]
		if !ok {
			t.Errorf("%s is routed but not in docs/openapi.yaml", form)
			continue
		}
		if action != r.Action {
			t.Errorf("%s: x-action %q in the reference, %q routed", form, action, r.Action)
		}
	}
	for form := range documented {
		if !routed[form] {
			t.Errorf("%s is documented but not routed", form)
		}
	}
}
