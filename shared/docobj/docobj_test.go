package docobj_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"routerd.dev/proto/api"
	"routerd.dev/shared/docobj"
	"routerd.dev/shared/testenv"
)

// TestRender: a document within InlineMax stays text; a larger one is an
// object holding exactly what was written, readable as often as needed
// and gone once deleted; a render that fails leaves no object behind.
func TestRender(t *testing.T) {
	nc := testenv.NATS(t)
	ctx := context.Background()
	text, obj, err := docobj.Render(ctx, nc, "etc/x.json", func(w io.Writer) error { _, err := io.WriteString(w, "{}\n"); return err })
	if err != nil || obj != nil || text != "{}\n" {
		t.Fatalf("small: %q %v %v", text, obj, err)
	}
	big := strings.Repeat("0123456789abcdef", docobj.InlineMax/16*3+5)
	text, obj, err = docobj.Render(ctx, nc, "etc/x.json", func(w io.Writer) error {
		for i := 0; i < len(big); i += 1000 { // many small writes, as an encoder makes
			if _, err := io.WriteString(w, big[i:min(i+1000, len(big))]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || obj == nil || text != "" || obj.Bytes != int64(len(big)) {
		t.Fatalf("large: %d bytes of text, %+v, %v", len(text), obj, err)
	}
	for i := 0; i < 2; i++ {
		if got, err := docobj.Text(ctx, nc, *obj); err != nil || got != big {
			t.Fatalf("read %d: %d bytes, %v", i, len(got), err)
		}
	}
	obs, err := docobj.Bucket(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	docobj.Delete(ctx, nc, map[string]api.ConfigObject{"etc/x.json": *obj})
	if _, err := docobj.Text(ctx, nc, *obj); err == nil {
		t.Error("a deleted object is still read")
	}
	failed := errors.New("store failed")
	_, obj, err = docobj.Render(ctx, nc, "etc/y.json", func(w io.Writer) error {
		if _, err := io.WriteString(w, big); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) || obj != nil {
		t.Fatalf("failed render: %v %v", obj, err)
	}
	if l, err := obs.List(ctx); err == nil && len(l) > 0 {
		t.Errorf("objects left: %d (%s)", len(l), l[0].Name)
	}
}
