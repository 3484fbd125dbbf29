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
		bus.Bind(api.FirewallAuthFailed, s.AuthFailed),
		bus.Bind(api.ProtectGet, s.ProtectList),
		bus.Bind(api.ProtectAddOp, s.ProtectAdd),
		bus.Bind(api.ProtectDeleteOp, s.ProtectDelete),
		bus.Bind(api.ProtectDeleteChecked, s.ProtectDeleteChecked),
		bus.Bind(api.Fail2banGet, s.Fail2banStatus),
		bus.Bind(api.Fail2banShow, s.Fail2banStatus),
		bus.Bind(api.Fail2banUnbanOp, s.Fail2banUnban),
		bus.Bind(api.FirewallGet, s.Rules),
		bus.Bind(api.FirewallFullGet, s.Full),
	}
}
