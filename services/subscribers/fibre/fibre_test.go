package fibre

import "testing"

// TestPortCVLAN: the spec's example (0/1/0 gives 116), the numbering
// across cards, and ports that cannot be numbered.
func TestPortCVLAN(t *testing.T) {
	for pon, want := range map[string]int{"0/1/0": 116, "0/0/0": 100, "0/1/15": 131, "0/2/3": 135, "1/17/15": 387} {
		if got, err := PortCVLAN(pon); err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", pon, got, err, want)
		}
	}
	for _, pon := range []string{"", "0/1", "0/1/16", "a/1/0", "0/-1/0", "0/250/0", "0/1/0/0"} {
		if got, err := PortCVLAN(pon); err == nil {
			t.Errorf("%s: %d, want an error", pon, got)
		}
	}
}
