package openapi_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"routerd.dev/gateway/openapi"
	"routerd.dev/proto/api"
)

// docs/openapi.yaml is what the table generates: regenerate with
// `make openapi` after changing an operation.
func TestReferenceIsCurrent(t *testing.T) {
	want, err := openapi.Generate(api.Table)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/openapi.yaml is stale: run `make openapi`")
	}
}

// The generated document is valid OpenAPI 3.
func TestReferenceValidates(t *testing.T) {
	raw, err := openapi.Generate(api.Table)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, op := range api.Table {
		m := op.Describe()
		for _, f := range m.REST {
			if f.Method == api.AnyMethod {
				continue
			}
			if doc.Paths.Find(f.Path) == nil || doc.Paths.Find(f.Path).GetOperation(f.Method) == nil {
				t.Errorf("%s %s is in the table but not in the reference", f.Method, f.Path)
			}
		}
	}
}
