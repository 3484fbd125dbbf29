package olt

import (
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/licence"
)

// LicenceFile is the router licence in the state directory (shared/licence;
// installed with `routerd licence install`). Changing OLT operations need
// the feature WriteFeature.
const LicenceFile = licence.File

// WriteFeature is the licence feature OLT writes need.
const WriteFeature = licence.OLTWrite

// EventLicence is published when a write is refused for the licence.
const EventLicence = "licence"

// licenceProblem says why writes are not licensed, "" when they are.
func (s *Service) licenceProblem() string {
	return licence.Problem(s.deps.StateDir, WriteFeature, s.now())
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
