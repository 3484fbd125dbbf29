package docobj

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// each[field] once per element of that field's array with the decoder at
// the element (the callback decodes it): one element in memory at a time.
// A field not in each is an error, as is anything after the object; a
// null array is an empty one.
func Elements(r io.Reader, each map[string]func(dec *json.Decoder) error) error {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	dec.DisallowUnknownFields()
	if err := delim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		field, _ := t.(string)
		fn, ok := each[field]
		if !ok {
			return fmt.Errorf("json: unknown field %q", field)
		}
		t, err = dec.Token()
		if err != nil {
			return err
		}
		if t == nil {
			continue
		}
		if d, ok := t.(json.Delim); !ok || d != '[' {
			return fmt.Errorf("json: %s: an array expected", field)
		}
		for dec.More() {
			if err := fn(dec); err != nil {
				return err
			}
		}
		if err := delim(dec, ']'); err != nil {
			return err
		}
	}
	if err := delim(dec, '}'); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("json: data after the document")
		}
		return err
	}
	return nil
}

func delim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("json: %q expected, found %v", want, t)
	}
	return nil
}
