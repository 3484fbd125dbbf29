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
		bus.Bind(api.AntispoofGet, s.spoof.Status),
		bus.Bind(api.AntispoofSetOp, s.spoof.Set),
		bus.Bind(api.AntispoofIfaceOp, s.spoof.SetIface),
		bus.Bind(api.AntispoofIfaceDelete, s.spoof.DeleteIface),
		bus.Bind(api.AntispoofLogGet, s.spoof.Log),
		bus.Bind(api.AntispoofSyncOp, s.spoof.Sync),
		bus.Bind(api.AntispoofModeGet, s.spoof.Mode),
		bus.Bind(api.FirewallConfig.Export, s.Export),
		bus.Bind(api.FirewallConfig.Import, s.Import),
	}
}
