package seal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSealOpen: a value opens with its key and record only; the key file
// is made once, mode 0600, read by a second Key; a value that is not
// sealed, damaged, or sealed for another record or under another key is
// refused with the error saying which.
func TestSealOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "test.key")
	k := New(path)
	if err := k.Load(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	s, err := k.SealText("secret", "peer:a")
	if err != nil || !IsText(s) || strings.Contains(s, "secret") {
		t.Fatalf("sealed %q %v", s, err)
	}
	if s2, _ := k.SealText("secret", "peer:a"); s2 == s {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
	if got, err := New(path).OpenText(s, "peer:a"); err != nil || got != "secret" {
		t.Errorf("open with a second Key on the file: %q %v", got, err)
	}
	if _, err := k.OpenText(s, "peer:b"); !errors.Is(err, ErrNotOpen) {
		t.Errorf("open for another record: %v", err)
	}
	if _, err := New(filepath.Join(dir, "other.key")).OpenText(s, "peer:a"); !errors.Is(err, ErrNotOpen) {
		t.Errorf("open under another key: %v", err)
	}
	for _, bad := range []string{"secret", "v1:!!", ""} {
		if _, err := k.OpenText(bad, "peer:a"); !errors.Is(err, ErrNotSealed) {
			t.Errorf("open %q: %v", bad, err)
		}
	}
	if _, err := k.OpenText("v1:AAAA", "peer:a"); !errors.Is(err, ErrDamaged) {
		t.Errorf("open a short value: %v", err)
	}
	if s, err := k.SealText("", "peer:a"); s != "" || err != nil {
		t.Errorf("seal of nothing: %q %v", s, err)
	}
	raw, err := k.Seal([]byte("x"), "olt:a")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Open(raw, "olt:a"); err != nil || string(got) != "x" {
		t.Errorf("open raw: %q %v", got, err)
	}
}

// TestKeyFileRefused: a key file of the wrong length is an error, not a
// new key over it.
func TestKeyFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := New(path).Load(); err == nil || !strings.Contains(err.Error(), "32-byte") {
		t.Errorf("short key file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "short" {
		t.Error("the key file was overwritten")
	}
}
