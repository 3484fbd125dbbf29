package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// Call sends one request to the API at url (the gateway's address and the
// path), with key in X-API-Key and body, when not nil, as JSON; it returns
// the status and the decoded JSON answer, failing the test on an answer
// that is not JSON.
func Call(t testing.TB, key, method, url string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}
