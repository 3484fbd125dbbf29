package firewall

import (
	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
)

// Endpoints are the service's operations.
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.FirewallBlock, s.Block),
		bus.Bind(api.FirewallUnblock, s.Unblock),
		bus.Bind(api.FirewallBlocks, s.Blocks),
	}
}
