package licence_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"routerd.dev/shared/licence"
)

func TestInstallReadProblem(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	if p := licence.Problem(dir, licence.OLTWrite, now); !strings.Contains(p, "no licence") {
		t.Errorf("missing: %q", p)
	}
	for _, bad := range []string{`{`, `{"features":["olt-wrte"]}`, `{"features":[],"expires":"31.12.2027"}`, `{"features":[],"extra":1}`} {
		if _, err := licence.Install(dir, []byte(bad)); err == nil {
			t.Errorf("installed %s", bad)
		}
	}
	if _, err := os.Stat(licence.Path(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused licence left a file: %v", err)
	}
	if _, err := licence.Install(dir, []byte(`{"features":[],"holder":"ISP"}`)); err != nil {
		t.Fatal(err)
	}
	if p := licence.Problem(dir, licence.OLTWrite, now); p != "the licence has no olt-write feature" {
		t.Errorf("no feature: %q", p)
	}
	if _, err := licence.Install(dir, []byte(`{"features":["olt-write"],"expires":"2026-11-24"}`)); err != nil {
		t.Fatal(err)
	}
	if p := licence.Problem(dir, licence.OLTWrite, now); p != "" {
		t.Errorf("valid on its last day: %q", p)
	}
	if p := licence.Problem(dir, licence.OLTWrite, now.Add(12*time.Hour)); p != "the licence expired on 2026-11-24" {
		t.Errorf("the day after: %q", p)
	}
	if fi, err := os.Stat(licence.Path(dir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode: %v %v", fi.Mode(), err)
	}
	if err := licence.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := licence.Remove(dir); !errors.Is(err, licence.ErrMissing) {
		t.Errorf("second remove: %v", err)
	}
}
