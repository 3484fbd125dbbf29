package graph

import (
	"context"

	"routerd.dev/shared/bus"
)

// graphEndpoints are /graph/*.
func (s *Service) graphEndpoints() []bus.Endpoint { return nil }

// runSampler samples the counters the graphs are drawn from until ctx
// ends.
func (s *Service) runSampler(ctx context.Context) {}
