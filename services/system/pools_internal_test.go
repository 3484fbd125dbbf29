package system

import "testing"

func TestPoolFill(t *testing.T) {
	n := servedNetwork{Iface: "sub0", Network: "10.77.0.0/24", PoolStart: "10.77.0.100", PoolEnd: "10.77.0.199"}
	if got := poolSize(n); got != 100 {
		t.Errorf("range pool: %d", got)
	}
	if got := poolSize(servedNetwork{Network: "10.0.0.0/24"}); got != 253 {
		t.Errorf("whole network: %d", got)
	}
	if got := poolSize(servedNetwork{Network: "2001:db8::/64"}); got != 0 {
		t.Errorf("IPv6: %d", got)
	}
	for _, c := range []struct {
		used     int
		severity string
	}{{10, ""}, {89, ""}, {90, "warning"}, {99, "warning"}, {100, "critical"}, {120, "critical"}} {
		f := poolFinding(n, c.used, 100)
		if c.severity == "" && f != nil || c.severity != "" && (f == nil || f.Severity != c.severity || f.Area != "dhcp-pool") {
			t.Errorf("%d used: %+v", c.used, f)
		}
	}
}
