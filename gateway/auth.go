package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// authMessage is the spec's text for a missing or wrong key.
const authMessage = "provide the X-API-Key header or the api_key parameter"

// keyMatches compares in constant time. Both sides are hashed first so the
// comparison takes the same time whatever the lengths; an empty configured
// key matches nothing, so a router without a key refuses every request.
func keyMatches(configured, given string) bool {
	if configured == "" || given == "" {
		return false
	}
	a := sha256.Sum256([]byte(configured))
	b := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// givenKey is the header, or the query parameter when the header is absent.
func givenKey(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k
	}
	return r.URL.Query().Get("api_key")
}

// maskedKeys are query parameters whose values never reach a log (the
// action form of POST /snmp carries the SNMP community as one).
var maskedKeys = []string{"pass", "password", "api_key", "community"}

// MaskURL renders a request URL for logs with secret values replaced.
func MaskURL(u *url.URL) string {
	q := u.Query()
	if len(q) == 0 {
		return u.Path
	}
	for _, k := range maskedKeys {
		for key := range q {
			if strings.EqualFold(key, k) {
				for i := range q[key] {
					q[key][i] = "***"
				}
			}
		}
	}
	// Encode keeps '*' readable; decode the escapes of the mask only.
	return u.Path + "?" + strings.ReplaceAll(q.Encode(), "%2A%2A%2A", "***")
}

// AuthLog appends one line per failed authentication. The format is the
// one ban services match on: a timestamp, the word FAILED, the caller.
type AuthLog struct {
	mu   sync.Mutex
	path string
	now  func() time.Time
}

// NewAuthLog writes to path, creating its directory.
func NewAuthLog(path string) (*AuthLog, error) {
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("gateway: auth log: %w", err)
		}
	}
	return &AuthLog{path: path, now: time.Now}, nil
}

// Failure records one refused request.
func (l *AuthLog) Failure(caller string, r *http.Request, reason string) {
	if l == nil || l.path == "" {
		return
	}
	line := fmt.Sprintf("%s routerd-api: authentication FAILED from %s: %s %s (%s)\n",
		l.now().Format("2006-01-02 15:04:05"), caller, r.Method, MaskURL(r.URL), reason)
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line)
}
