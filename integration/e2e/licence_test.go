package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLicenceCommand: the licence is managed on the router's command line
// only: install checks the file and refuses a damaged one (leaving the old
// in place), show reads it, remove removes it.
func TestLicenceCommand(t *testing.T) {
	bin, state := binary(t), t.TempDir()
	run := func(wantOK bool, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"licence", "--state", state}, args...)...).CombinedOutput()
		if (err == nil) != wantOK {
			t.Fatalf("routerd licence %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run(false, "show"); !strings.Contains(out, "no licence is installed") {
		t.Errorf("show without a licence: %s", out)
	}
	good := filepath.Join(t.TempDir(), "lic.json")
	os.WriteFile(good, []byte(`{"features":["olt-write"],"expires":"2999-12-31","holder":"Example ISP"}`), 0o644)
	if out := run(true, "install", good); !strings.Contains(out, "features olt-write") {
		t.Errorf("install: %s", out)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"features":["everything"]}`), 0o644)
	if out := run(false, "install", bad); !strings.Contains(out, `unknown feature "everything"`) {
		t.Errorf("install of a bad licence: %s", out)
	}
	if out := run(true, "show"); !strings.Contains(out, "olt-write") || !strings.Contains(out, "Example ISP") || !strings.Contains(out, "days left") {
		t.Errorf("show: %s", out)
	}
	if fi, err := os.Stat(filepath.Join(state, "licence.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("installed licence: %v %v", fi, err)
	}
	run(true, "remove")
	if _, err := os.Stat(filepath.Join(state, "licence.json")); !os.IsNotExist(err) {
		t.Errorf("after remove: %v", err)
	}
	run(false, "frobnicate")
}
