package api

import (
	"encoding/json"
	"testing"
)

// TestTextFastPath: the plain-string shortcut reads exactly what
// json.Unmarshal would.
func TestTextFastPath(t *testing.T) {
	for _, raw := range []string{`""`, `"gold"`, `"a b/c:d"`, `"é ü 日本"`, `"a\"b"`, `"a\\b"`, `"\u0041"`, "\"a\xffb\"", "\"tab\there\"", `"x`, `x"`, `"`} {
		var want string
		wantOK := json.Unmarshal([]byte(raw), &want) == nil
		got, ok := text(json.RawMessage(raw))
		if ok != wantOK || (ok && got != want) {
			t.Errorf("text(%q) = %q, %v; json.Unmarshal: %q, %v", raw, got, ok, want, wantOK)
		}
	}
}
