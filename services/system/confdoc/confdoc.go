// Package confdoc is the pure logic of configuration documents: the digest
// of a set of documents, which paths differ between two sets, secrets
// masked for display, and a unified text diff. Documents are named texts
// (path to content), as the owners of the configuration render them.
package confdoc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"regexp"
	"sort"
	"strings"

	"routerd.dev/proto/api"
)

// Docs are configuration documents: path to content.
type Docs = map[string]string

// Paths returns the paths of d, sorted.
func Paths(d Docs) []string {
	out := make([]string, 0, len(d))
	for p := range d {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Source is one document read as a stream, as often as needed (a digest
// pass, then a storing pass): the documents of 100,000 subscribers are
// never held whole.
type Source struct {
	Path  string
	Bytes int64
	Open  func() (io.ReadCloser, error)
}

// TextSources are the documents of d as sources, in path order.
func TextSources(d Docs) []Source {
	out := make([]Source, 0, len(d))
	for _, p := range Paths(d) {
		c := d[p]
		out = append(out, Source{Path: p, Bytes: int64(len(c)), Open: func() (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(c)), nil
		}})
	}
	return out
}

// SortSources orders sources by path, the order Digest covers them in.
func SortSources(s []Source) {
	sort.Slice(s, func(i, j int) bool { return s[i].Path < s[j].Path })
}

// Digest is the sha256 over the documents' paths and contents in path
// order: equal digests, equal configurations.
func Digest(d Docs) string {
	h := sha256.New()
	for _, p := range Paths(d) {
		io.WriteString(h, p)
		h.Write([]byte{0})
		io.WriteString(h, d[p])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FileDigest is the sha256 of one document's content.
func FileDigest(content string) string {
	s := sha256.Sum256([]byte(content))
	return hex.EncodeToString(s[:])
}

// Bytes is the documents' total size.
func Bytes(d Docs) int64 {
	var n int64
	for _, c := range d {
		n += int64(len(c))
	}
	return n
}

// Compare lists the paths added, removed and changed from a to b.
func Compare(a, b Docs) api.ConfigChanges {
	ch := api.ConfigChanges{Added: []string{}, Removed: []string{}, Changed: []string{}}
	for _, p := range Paths(b) {
		old, ok := a[p]
		switch {
		case !ok:
			ch.Added = append(ch.Added, p)
		case old != b[p]:
			ch.Changed = append(ch.Changed, p)
		}
	}
	for _, p := range Paths(a) {
		if _, ok := b[p]; !ok {
			ch.Removed = append(ch.Removed, p)
		}
	}
	return ch
}

// Masked is what a secret is shown as.
const Masked = "********"

// secretWords name the keys whose string values are secrets: passwords,
// keys, tokens, SNMP communities, pre-shared keys.
var secretWords = []string{"password", "sealed", "passwd", "passphrase", "secret", "token", "communit", "psk", "private", "credential"}

// IsSecret reports whether a JSON key names a secret.
func IsSecret(key string) bool {
	k := strings.ToLower(key)
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return k == "key" || strings.HasSuffix(k, "key") || strings.HasSuffix(k, "keys") || strings.HasSuffix(k, "_key_sealed")
}

// Mask returns the document with every string value under a secret key
// (also inside arrays and objects under it) replaced by Masked, keys in
// their order, indented with four spaces. A document that is not JSON is
// masked line by line ("key": "value" and key=value forms).
func Mask(content string) string {
	out, err := maskJSON(content)
	if err == nil {
		return out
	}
	return maskText(content)
}

func maskJSON(content string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(content))
	dec.UseNumber()
	var buf bytes.Buffer
	// stack of containers: for objects, whether the next string is a key;
	// secret depth says whether we are under a secret key.
	type frame struct {
		object    bool
		expectKey bool
		secret    bool // this container's values are secret
		keySecret bool // the pending value belongs to a secret key
	}
	var stack []frame
	first := []bool{true}
	sep := func() {
		n := len(first) - 1
		if !first[n] {
			buf.WriteByte(',')
		}
		first[n] = false
	}
	secretNow := func() bool {
		if len(stack) == 0 {
			return false
		}
		f := stack[len(stack)-1]
		return f.secret || f.keySecret
	}
	afterValue := func() {
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expectKey = true
			stack[len(stack)-1].keySecret = false
		}
	}
	values := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		inObjKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].expectKey
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) == 0 {
					values++
				}
				if !(len(stack) > 0 && stack[len(stack)-1].object) {
					sep()
				}
				sec := secretNow()
				stack = append(stack, frame{object: t == '{', expectKey: t == '{', secret: sec})
				first = append(first, true)
				buf.WriteRune(rune(t))
			case '}', ']':
				stack = stack[:len(stack)-1]
				first = first[:len(first)-1]
				buf.WriteRune(rune(t))
				afterValue()
			}
		case string:
			if inObjKey {
				sep()
				b, _ := json.Marshal(t)
				buf.Write(b)
				buf.WriteByte(':')
				f := &stack[len(stack)-1]
				f.expectKey, f.keySecret = false, IsSecret(t)
				continue
			}
			if !(len(stack) > 0 && stack[len(stack)-1].object) {
				sep()
			}
			if secretNow() && t != "" {
				t = Masked
			}
			b, _ := json.Marshal(t)
			buf.Write(b)
			afterValue()
		default:
			if len(stack) == 0 {
				values++
			}
			if !(len(stack) > 0 && stack[len(stack)-1].object) {
				sep()
			}
			switch v := t.(type) {
			case nil:
				buf.WriteString("null")
			case bool:
				if v {
					buf.WriteString("true")
				} else {
					buf.WriteString("false")
				}
			case json.Number:
				buf.WriteString(v.String())
			}
			afterValue()
		}
	}
	if values > 1 {
		return "", io.ErrUnexpectedEOF
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "    "); err != nil {
		return "", err
	}
	return out.String() + "\n", nil
}

var (
	quotedSecret = regexp.MustCompile(`("([^"\\]*)"\s*:\s*)"((?:[^"\\]|\\.)*)"`)
	plainSecret  = regexp.MustCompile(`(?m)^(\s*([A-Za-z0-9_.-]+)\s*[=:]\s*)(\S.*)$`)
)

func maskText(content string) string {
	content = quotedSecret.ReplaceAllStringFunc(content, func(m string) string {
		sub := quotedSecret.FindStringSubmatch(m)
		if !IsSecret(sub[2]) || sub[3] == "" {
			return m
		}
		return sub[1] + `"` + Masked + `"`
	})
	return plainSecret.ReplaceAllStringFunc(content, func(m string) string {
		sub := plainSecret.FindStringSubmatch(m)
		if !IsSecret(sub[2]) || strings.HasPrefix(strings.TrimSpace(sub[3]), `"`+Masked) {
			return m
		}
		return sub[1] + Masked
	})
}

// MaskAll masks every document of d.
func MaskAll(d Docs) Docs {
	out := make(Docs, len(d))
	for p, c := range d {
		out[p] = Mask(c)
	}
	return out
}
