package graph

import (
	"context"

	"routerd.dev/shared/bus"
)

// snmpArea is the SNMP agent's state in the service.
type snmpArea struct{}

// snmpEndpoints are GET and POST /snmp.
func (s *Service) snmpEndpoints() []bus.Endpoint { return nil }

// runSNMP runs the SNMP agent until ctx ends.
func (s *Service) runSNMP(ctx context.Context) {}
