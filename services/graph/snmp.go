package graph

import (
	"context"

	"routerd.dev/shared/bus"
)

// snmpEndpoints are GET and POST /snmp.
func (s *Service) snmpEndpoints() []bus.Endpoint { return nil }

// runSNMP runs the SNMP agent until ctx ends.
func (s *Service) runSNMP(ctx context.Context) {}
