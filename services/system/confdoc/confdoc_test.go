package confdoc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMaskJSON(t *testing.T) {
	in := `{"peers": [{"name": "up1", "password": "s3cret-bgp", "password_set": true, "asn": 65000}],
"api_key": "k-123456", "snmp": {"community": "public-ro", "communities": ["c1", "c2"]},
"token": "", "x": {"private_key": {"pem": "BEGIN"}}, "comment": "password is not here", "n": 1.5, "z": null}`
	out := Mask(in)
	for _, secret := range []string{"s3cret-bgp", "k-123456", "public-ro", "c1", "c2", "BEGIN"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q shown unmasked:\n%s", secret, out)
		}
	}
	for _, kept := range []string{`"password_set": true`, `"asn": 65000`, `"comment": "password is not here"`, `"token": ""`, `"n": 1.5`, `"z": null`, `"name": "up1"`} {
		if !strings.Contains(out, kept) {
			t.Errorf("%s lost:\n%s", kept, out)
		}
	}
	// key order is kept
	if strings.Index(out, `"peers"`) > strings.Index(out, `"api_key"`) {
		t.Errorf("keys reordered:\n%s", out)
	}
	if Mask(out) != out {
		t.Errorf("masking twice changed it")
	}
}

func TestMaskText(t *testing.T) {
	in := "{ broken\n\"password\": \"pw1\",\nsnmp_community = comm2\nname = x\n"
	out := Mask(in)
	if strings.Contains(out, "pw1") || strings.Contains(out, "comm2") || !strings.Contains(out, "name = x") {
		t.Errorf("text masking:\n%s", out)
	}
}

func TestCompareDigest(t *testing.T) {
	a := Docs{"etc/a.json": "1\n", "etc/b.json": "2\n"}
	b := Docs{"etc/b.json": "3\n", "etc/c.json": "4\n"}
	ch := Compare(a, b)
	if strings.Join(ch.Added, ",") != "etc/c.json" || strings.Join(ch.Removed, ",") != "etc/a.json" || strings.Join(ch.Changed, ",") != "etc/b.json" {
		t.Errorf("changes %+v", ch)
	}
	if Digest(a) == Digest(b) || Digest(a) != Digest(Docs{"etc/b.json": "2\n", "etc/a.json": "1\n"}) {
		t.Errorf("digest not a function of the content")
	}
	// the separator keeps path and content apart
	if Digest(Docs{"a": "bc"}) == Digest(Docs{"ab": "c"}) {
		t.Errorf("digest ambiguous")
	}
}

// TestDiffPatches checks the unified diff against patch(1): applying it to
// the old text gives the new one.
func TestDiffPatches(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch not installed")
	}
	var old, nu []string
	for i := 0; i < 200; i++ {
		old = append(old, "line "+string(rune('a'+i%26))+" "+itoa(i)+"\n")
	}
	nu = append(nu, old...)
	nu[5] = "changed 5\n"
	nu = append(nu[:50], nu[53:]...)
	nu = append(nu[:100], append([]string{"ins 1\n", "ins 2\n"}, nu[100:]...)...)
	nu[len(nu)-1] = "last changed\n"
	cases := []struct{ a, b string }{
		{strings.Join(old, ""), strings.Join(nu, "")},
		{"", "new\nfile\n"},
		{"x\ny\n", ""},
		{"a\nb\nc\n", "c\nb\na\n"},
	}
	for i, c := range cases {
		d := unified(lines(c.a), lines(c.b))
		dir := t.TempDir()
		f := filepath.Join(dir, "f")
		os.WriteFile(f, []byte(c.a), 0o644)
		os.WriteFile(filepath.Join(dir, "p"), []byte("--- f\n+++ f\n"+d), 0o644)
		out, err := exec.Command("patch", "-s", f, filepath.Join(dir, "p")).CombinedOutput()
		if err != nil {
			t.Fatalf("case %d: patch: %v %s\n%s", i, err, out, d)
		}
		got, _ := os.ReadFile(f)
		if string(got) != c.b {
			t.Errorf("case %d: patched text differs:\n%s", i, d)
		}
	}
	if Diff(Docs{"a": "1\n"}, Docs{"a": "1\n"}, "1", "running") != "" {
		t.Errorf("equal documents gave a diff")
	}
	d := Diff(Docs{"etc/x.json": "1\n"}, Docs{"etc/y.json": "2\n"}, "1", "running")
	if !strings.Contains(d, "--- a/etc/x.json") || !strings.Contains(d, "+++ /dev/null") || !strings.Contains(d, "+2\n") {
		t.Errorf("diff of added/removed documents:\n%s", d)
	}
}

func itoa(i int) string {
	s := ""
	for {
		s = string(rune('0'+i%10)) + s
		i /= 10
		if i == 0 {
			return s
		}
	}
}
