// Package jsonout renders answers the way the spec fixes them: indented with
// four spaces and ending with a newline.
package jsonout

import (
	"bytes"
	"encoding/json"
)

// Marshal encodes v indented with four spaces and a trailing newline.
// HTML characters are left unescaped: clients read JSON, not HTML.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Reindent rewrites a compact JSON document into the answer format.
func Reindent(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "    "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}
