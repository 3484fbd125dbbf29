package firewall_test

import (
	"testing"

	"routerd.dev/shared/testenv"
)

// One embedded etcd serves the whole package; each test has its own keyspace.
func TestMain(m *testing.M) { testenv.Main(m) }
