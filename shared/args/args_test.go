package args

import "testing"

func TestGettersAcceptBothForms(t *testing.T) {
	rest := Parse([]byte(`{"n": 100, "b": true, "s": "x", "f": 1.5}`))
	action := Parse([]byte(`{"n": "100", "b": "yes", "s": "x"}`))
	for name, a := range map[string]Args{"rest": rest, "action": action} {
		if n, ok, err := a.Int("n"); err != nil || !ok || n != 100 {
			t.Errorf("%s: Int(n) = %d, %v, %v; want 100, true, nil", name, n, ok, err)
		}
		if b, ok, err := a.Bool("b"); err != nil || !ok || !b {
			t.Errorf("%s: Bool(b) = %v, %v, %v; want true, true, nil", name, b, ok, err)
		}
		if got, want := a.String("s"), "x"; got != want {
			t.Errorf("%s: String(s) = %q, want %q", name, got, want)
		}
	}
	if _, _, err := rest.Int("f"); err == nil {
		t.Error("Int(1.5): want an error")
	}
	if _, _, err := Parse([]byte(`{"b":"maybe"}`)).Bool("b"); err == nil {
		t.Error("Bool(maybe): want an error")
	}
}

func TestNonObjectBodyCountsAsEmpty(t *testing.T) {
	for _, body := range []string{``, `[1,2]`, `"x"`, `42`, `null`, `{bad`} {
		if got := Parse([]byte(body)); len(got) != 0 {
			t.Errorf("Parse(%q) = %v, want empty", body, got)
		}
	}
}
