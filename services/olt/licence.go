package olt

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"routerd.dev/shared/apierr"
)

// LicenceFile is the router licence in the state directory, read by this
// service until the system's licence lands: {"features": ["olt-write"],
// "expires": "2027-12-31"} (expires optional). Changing OLT operations
// need the feature WriteFeature.
const LicenceFile = "licence.json"

// WriteFeature is the licence feature OLT writes need.
const WriteFeature = "olt-write"

// EventLicence is published when a write is refused for the licence.
const EventLicence = "licence"

type licence struct {
	Features []string `json:"features"`
	Expires  string   `json:"expires"`
}

// licenceProblem says why writes are not licensed, "" when they are.
func (s *Service) licenceProblem() string {
	raw, err := os.ReadFile(filepath.Join(s.deps.StateDir, LicenceFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "no licence is installed (" + LicenceFile + " in the state directory)"
	}
	if err != nil {
		return "the licence cannot be read: " + err.Error()
	}
	var l licence
	if err := json.Unmarshal(raw, &l); err != nil {
		return "the licence file is damaged: " + err.Error()
	}
	if !slices.Contains(l.Features, WriteFeature) {
		return "the licence has no " + WriteFeature + " feature"
	}
	if l.Expires != "" {
		end, err := time.Parse("2006-01-02", l.Expires)
		if err != nil {
			return "the licence's expiry date is unreadable: " + l.Expires
		}
		if s.now().After(end.Add(24 * time.Hour)) {
			return "the licence expired on " + l.Expires
		}
	}
	return ""
}

// licensed refuses a write without the licence's write feature (409 with
// `licence`) and publishes a licence event saying why.
func (s *Service) licensed() error {
	p := s.licenceProblem()
	if p == "" {
		return nil
	}
	s.pub.Publish(EventLicence, nil, map[string]string{"feature": WriteFeature, "message": p})
	return apierr.Conflict("OLT writes need the licence's %s feature: %s", WriteFeature, p).With("licence", p)
}
