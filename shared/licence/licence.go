// Package licence reads and installs the router's licence: a file in the
// state directory naming the features it enables (the OLT write feature
// among them) and, optionally, the last day it is valid. It is managed only
// on the router's command line (`routerd licence ...`), never over the
// API, so a compromised API key cannot grant itself features; the services
// only read it (the olt service refuses writes without its feature, the
// system service raises a licence alert when it is missing, damaged,
// expired or about to expire).
package licence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File is the licence's name in the state directory.
const File = "licence.json"

// OLTWrite is the feature that changing OLT operations need.
const OLTWrite = "olt-write"

// Features are the features routerd knows; a licence naming another is
// refused at install, so a typing mistake does not pass silently.
var Features = []string{OLTWrite}

// ErrMissing is returned by Read when no licence is installed.
var ErrMissing = errors.New("no licence is installed")

// Licence is the file's content: {"features": ["olt-write"], "expires":
// "2027-12-31", "holder": "ISP Ltd", "comment": "..."}.
type Licence struct {
	Features []string `json:"features"`
	// Expires is the last valid day, YYYY-MM-DD; empty never expires.
	Expires string `json:"expires,omitempty"`
	Holder  string `json:"holder,omitempty"`
	Comment string `json:"comment,omitempty"`
}

// Path is the licence file of a state directory.
func Path(stateDir string) string { return filepath.Join(stateDir, File) }

// Parse reads and checks a licence.
func Parse(raw []byte) (Licence, error) {
	var l Licence
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Licence{}, fmt.Errorf("the licence is damaged: %w", err)
	}
	for _, f := range l.Features {
		if !slices.Contains(Features, f) {
			return Licence{}, fmt.Errorf("the licence names an unknown feature %q (known: %v)", f, Features)
		}
	}
	if l.Expires != "" {
		if _, err := time.Parse(time.DateOnly, l.Expires); err != nil {
			return Licence{}, fmt.Errorf("the licence's expiry date %q is not YYYY-MM-DD", l.Expires)
		}
	}
	return l, nil
}

// Read reads the state directory's licence: ErrMissing when there is none,
// another error when it cannot be read or is damaged.
func Read(stateDir string) (Licence, error) {
	raw, err := os.ReadFile(Path(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return Licence{}, ErrMissing
	}
	if err != nil {
		return Licence{}, fmt.Errorf("the licence cannot be read: %w", err)
	}
	return Parse(raw)
}

// Ends is the first instant the licence is no longer valid (the day after
// Expires); the zero time when it never expires.
func (l Licence) Ends() time.Time {
	end, err := time.Parse(time.DateOnly, l.Expires)
	if err != nil {
		return time.Time{}
	}
	return end.Add(24 * time.Hour)
}

// Expired says whether the licence has ended at now.
func (l Licence) Expired(now time.Time) bool {
	e := l.Ends()
	return !e.IsZero() && !now.Before(e)
}

// Problem says why feature is not licensed at now in the state directory,
// "" when it is.
func Problem(stateDir, feature string, now time.Time) string {
	l, err := Read(stateDir)
	switch {
	case errors.Is(err, ErrMissing):
		return "no licence is installed (" + File + " in the state directory)"
	case err != nil:
		return err.Error()
	case !slices.Contains(l.Features, feature):
		return "the licence has no " + feature + " feature"
	case l.Expired(now):
		return "the licence expired on " + l.Expires
	}
	return ""
}

// Install checks the licence in raw and writes it into the state directory
// atomically (a new file renamed over the old), readable by root only.
func Install(stateDir string, raw []byte) (Licence, error) {
	l, err := Parse(raw)
	if err != nil {
		return Licence{}, err
	}
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		return Licence{}, err
	}
	tmp, err := os.CreateTemp(stateDir, File+".new-*")
	if err != nil {
		return Licence{}, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return Licence{}, err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return Licence{}, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return Licence{}, err
	}
	if err := tmp.Close(); err != nil {
		return Licence{}, err
	}
	return l, os.Rename(tmp.Name(), Path(stateDir))
}

// Remove removes the installed licence; ErrMissing when there is none.
func Remove(stateDir string) error {
	err := os.Remove(Path(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrMissing
	}
	return err
}
