package graph

import (
	"context"

	"routerd.dev/shared/bus"
)

// graphArea is the sampler's and the graphs' state in the service.
type graphArea struct{}

// graphEndpoints are /graph/*.
func (s *Service) graphEndpoints() []bus.Endpoint { return nil }

// runSampler samples the counters the graphs are drawn from until ctx
// ends.
func (s *Service) runSampler(ctx context.Context) {}
