package mac

import (
	"net"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"aa:bb:cc:dd:ee:ff": "AA:BB:CC:DD:EE:FF", "aabbccddeeff": "AA:BB:CC:DD:EE:FF",
		"aabb.ccdd.eeff": "AA:BB:CC:DD:EE:FF", "aa-bb-cc-dd-ee-ff": "AA:BB:CC:DD:EE:FF",
		" 02:00:00:00:00:0a ": "02:00:00:00:00:0A", "02:0A:FF:00:9B:C1": "02:0A:FF:00:9B:C1",
		"aa:bb:cc:dd:ee": "", "aa:bb:cc:dd:ee:fg": "", "": "", "10.0.0.1": "", "aabbccddeeff00": "",
		"AA:BB:CC:DD:EE:FG": "", "AA:BB:CC:DD:EE:F:": "", "AA-BB-CC-DD-EE-FF": "AA:BB:CC:DD:EE:FF",
	} {
		got, err := Normalize(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
		// The same as the standard library's reading of the colon form.
		h := strings.NewReplacer(":", "", "-", "", ".", "").Replace(strings.TrimSpace(in))
		if len(h) == 12 {
			hw, perr := net.ParseMAC(h[0:2] + ":" + h[2:4] + ":" + h[4:6] + ":" + h[6:8] + ":" + h[8:10] + ":" + h[10:12])
			if (perr == nil) != (err == nil) || perr == nil && strings.ToUpper(hw.String()) != got {
				t.Errorf("Normalize(%q) = %q, %v; net.ParseMAC: %v, %v", in, got, err, hw, perr)
			}
		}
	}
}
