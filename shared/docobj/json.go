package docobj

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// ArrayWriter writes a document that is one JSON object of arrays
// ({"clients": [...], "services": [...]}) an element at a time, byte for
// byte as json.MarshalIndent(doc, "", "    ") renders it: a document
// streamed has the digest it had when rendered whole, so versions saved
// before compare equal.
type ArrayWriter struct {
	w      *bufio.Writer
	fields int
	n      int // elements in the open array
	err    error
}

// NewArrayWriter starts the object.
func NewArrayWriter(w io.Writer) *ArrayWriter {
	a := &ArrayWriter{w: bufio.NewWriterSize(w, 64<<10)}
	a.put("{")
	return a
}

func (a *ArrayWriter) put(s string) {
	if a.err == nil {
		_, a.err = a.w.WriteString(s)
	}
}

func (a *ArrayWriter) closeArray() {
	if a.fields == 0 {
		return
	}
	if a.n == 0 {
		a.put("]")
	} else {
		a.put("\n    ]")
	}
}

// Field closes the array before it and opens the array of name.
func (a *ArrayWriter) Field(name string) {
	a.closeArray()
	if a.fields > 0 {
		a.put(",")
	}
	k, _ := json.Marshal(name)
	a.put("\n    " + string(k) + ": [")
	a.fields++
	a.n = 0
}

// Element appends v to the open array.
func (a *ArrayWriter) Element(v any) error {
	if a.err != nil {
		return a.err
	}
	b, err := json.MarshalIndent(v, "        ", "    ")
	if err != nil {
		return err
	}
	if a.n == 0 {
		a.put("\n        ")
	} else {
		a.put(",\n        ")
	}
	a.n++
	if a.err == nil {
		_, a.err = a.w.Write(b)
	}
	return a.err
}

// Close ends the document (a trailing newline, as the owners write it)
// and flushes it.
func (a *ArrayWriter) Close() error {
	a.closeArray()
	if a.fields == 0 {
		a.put("}\n")
	} else {
		a.put("\n}\n")
	}
	if a.err != nil {
		return a.err
	}
	return a.w.Flush()
}

// Elements reads a document that is one JSON object of arrays, calling
// each[field] once per element of that field's array with the element's
// text (valid only during the call; the callback decodes it, with Flat
// and Strict): one element in memory at a time. A field not in each is
// an error, as is anything after the object; a null array is an empty
// one.
//
// It reads the document a byte at a time rather than through a
// json.Decoder, which scans each element twice (once to find its end,
// once to decode it) and decodes by reflection: 100,000 clients took
// 1.1 s a pass that way, a third of the CPU a restore into an emptied
// router spent outside etcd. The element's own syntax is its decoder's
// to check; Elements checks the document around the elements.
func Elements(r io.Reader, each map[string]func(raw []byte) error) error {
	s := &scanner{r: r, buf: make([]byte, 0, 64<<10)}
	if err := s.expect('{'); err != nil {
		return err
	}
	c, err := s.next()
	if err != nil {
		return err
	}
	for c != '}' {
		if c != '"' {
			return fmt.Errorf("json: a field name expected, found %q", c)
		}
		s.raw = s.raw[:0]
		if err := s.value(c); err != nil {
			return err
		}
		var field string
		if err := json.Unmarshal(s.raw, &field); err != nil {
			return err
		}
		fn, ok := each[field]
		if !ok {
			return fmt.Errorf("json: unknown field %q", field)
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if c, err = s.next(); err != nil {
			return err
		}
		switch c {
		case 'n':
			s.raw = s.raw[:0]
			if err := s.value(c); err != nil {
				return err
			}
			if string(s.raw) != "null" {
				return fmt.Errorf("json: %s: an array expected", field)
			}
		case '[':
			if err := s.array(fn); err != nil {
				return err
			}
		default:
			return fmt.Errorf("json: %s: an array expected", field)
		}
		if c, err = s.next(); err != nil {
			return err
		}
		switch c {
		case ',':
			if c, err = s.next(); err != nil {
				return err
			}
			if c == '}' {
				return errors.New("json: a field name expected after ','")
			}
		case '}':
		default:
			return fmt.Errorf("json: ',' or '}' expected, found %q", c)
		}
	}
	if _, err := s.next(); err != io.EOF {
		if err == nil {
			err = errors.New("json: data after the document")
		}
		return err
	}
	return nil
}

// scanner reads a document's structure from a buffer of its own; raw
// holds the value last read.
type scanner struct {
	r   io.Reader
	buf []byte
	pos int
	err error // of the last read, once buf is drained
	raw []byte
}

// fill reads more of the document into buf once it is drained; false at
// the end or on a failure (s.err).
func (s *scanner) fill() bool {
	if s.err != nil {
		return false
	}
	n, err := s.r.Read(s.buf[:cap(s.buf)])
	s.buf, s.pos = s.buf[:n], 0
	if err != nil {
		s.err = err
	}
	return n > 0 || s.fill()
}

// byte is the next byte of the document.
func (s *scanner) byte() (byte, error) {
	if s.pos == len(s.buf) && !s.fill() {
		return 0, s.err
	}
	c := s.buf[s.pos]
	s.pos++
	return c, nil
}

// next is the next byte that is not JSON whitespace (io.EOF at the end).
func (s *scanner) next() (byte, error) {
	for {
		c, err := s.byte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c, nil
	}
}

func (s *scanner) expect(want byte) error {
	c, err := s.next()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if c != want {
		return fmt.Errorf("json: %q expected, found %q", want, c)
	}
	return nil
}

// array reads the elements of an array whose '[' was read, handing each
// to fn.
func (s *scanner) array(fn func(raw []byte) error) error {
	c, err := s.next()
	if err != nil {
		return eof(err)
	}
	if c == ']' {
		return nil
	}
	for {
		s.raw = s.raw[:0]
		if err := s.value(c); err != nil {
			return err
		}
		if err := fn(s.raw); err != nil {
			return err
		}
		if c, err = s.next(); err != nil {
			return eof(err)
		}
		switch c {
		case ']':
			return nil
		case ',':
			if c, err = s.next(); err != nil {
				return eof(err)
			}
		default:
			return fmt.Errorf("json: ',' or ']' expected after an element, found %q", c)
		}
	}
}

// value appends to raw one value starting with c (already read): an
// object or array up to its matching bracket, a string up to its closing
// quote, anything else up to the next delimiter. Only the brackets and
// strings are followed; the value's own syntax is its decoder's to check.
func (s *scanner) value(c byte) error {
	s.raw = append(s.raw, c)
	switch c {
	case '"':
		return s.str()
	case '{', '[':
	case '}', ']', ',', ':':
		return fmt.Errorf("json: a value expected, found %q", c)
	default:
		for {
			if s.pos == len(s.buf) && !s.fill() {
				if s.err == io.EOF {
					return nil
				}
				return s.err
			}
			switch c := s.buf[s.pos]; c {
			case ',', ']', '}', ':', ' ', '\t', '\n', '\r':
				return nil
			default:
				s.raw = append(s.raw, c)
				s.pos++
			}
		}
	}
	depth := 1
	for depth > 0 {
		c, err := s.byte()
		if err != nil {
			return eof(err)
		}
		s.raw = append(s.raw, c)
		switch c {
		case '"':
			if err := s.str(); err != nil {
				return err
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	return nil
}

// str appends the rest of a string whose opening quote is in raw, a run
// of plain bytes at a time.
func (s *scanner) str() error {
	for {
		if s.pos == len(s.buf) && !s.fill() {
			return eof(s.err)
		}
		rest := s.buf[s.pos:]
		i := 0
		for i < len(rest) && rest[i] != '"' && rest[i] != '\\' {
			i++
		}
		s.raw = append(s.raw, rest[:i]...)
		s.pos += i
		if i == len(rest) {
			continue
		}
		c := rest[i]
		s.raw = append(s.raw, c)
		s.pos++
		if c == '"' {
			return nil
		}
		// The escaped byte, whatever it is, does not end the string.
		c, err := s.byte()
		if err != nil {
			return eof(err)
		}
		s.raw = append(s.raw, c)
	}
}

func eof(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Strict decodes raw, one JSON value, into v as encoding/json does,
// refusing fields v does not have.
func Strict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("json: data after the value")
	}
	return nil
}

// Flat calls fn with each field of raw in order when raw is one JSON
// object whose names and string values hold no escapes and whose values
// are all strings, true, false or null: kind is '"' (text is the
// string's bytes, without the quotes), 't', 'f' or 'n'. It reports
// whether raw was such an object and fn took every field (fn returns
// false for a field it has no place for). When it reports false, fn may
// have been called for some fields: the caller starts afresh and decodes
// raw with Strict, which gives the same result for what Flat takes and
// the error or the decoding of the rest (escapes, numbers, names in
// another case, bytes that are not UTF-8). It is how the per-subscriber
// documents' elements, written without escapes, decode without
// reflection.
func Flat(raw []byte, fn func(name, text []byte, kind byte) bool) bool {
	i := skip(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return false
	}
	i = skip(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return skip(raw, i+1) == len(raw)
	}
	for {
		if i == len(raw) || raw[i] != '"' {
			return false
		}
		name, j, ok := plain(raw, i+1)
		if !ok {
			return false
		}
		i = skip(raw, j)
		if i == len(raw) || raw[i] != ':' {
			return false
		}
		i = skip(raw, i+1)
		if i == len(raw) {
			return false
		}
		var text []byte
		kind := raw[i]
		switch kind {
		case '"':
			if text, i, ok = plain(raw, i+1); !ok {
				return false
			}
		case 't':
			i, ok = literal(raw, i, "true")
		case 'f':
			i, ok = literal(raw, i, "false")
		case 'n':
			i, ok = literal(raw, i, "null")
		default:
			return false
		}
		if !ok || !fn(name, text, kind) {
			return false
		}
		i = skip(raw, i)
		if i == len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i = skip(raw, i+1)
		case '}':
			return skip(raw, i+1) == len(raw)
		default:
			return false
		}
	}
}

// skip is the index of the first byte from i that is not JSON whitespace.
func skip(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plain reads a string from i (after its opening quote) that holds no
// escape and no control character and is UTF-8: its bytes and the index
// after its closing quote.
func plain(raw []byte, i int) ([]byte, int, bool) {
	ascii := true
	for j := i; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(raw[i:j]) {
				return nil, 0, false
			}
			return raw[i:j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, 0, false
}

// literal reads word (true, false, null) at i, which must end there.
func literal(raw []byte, i int, word string) (int, bool) {
	j := i + len(word)
	if j > len(raw) || string(raw[i:j]) != word {
		return 0, false
	}
	if j < len(raw) {
		switch raw[j] {
		case ' ', '\t', '\n', '\r', ',', '}':
		default:
			return 0, false
		}
	}
	return j, true
}
