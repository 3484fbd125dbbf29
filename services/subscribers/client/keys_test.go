package client

import (
	"net/netip"
	"testing"
	"time"
)

func TestNormalizeMAC(t *testing.T) {
	for in, want := range map[string]string{
		"aa:bb:cc:dd:ee:ff": "AA:BB:CC:DD:EE:FF",
		"aabbccddeeff":      "AA:BB:CC:DD:EE:FF", "aabb.ccdd.eeff": "AA:BB:CC:DD:EE:FF", " 02:00:00:00:00:0a ": "02:00:00:00:00:0A",
		"aa:bb:cc:dd:ee": "", "aa:bb:cc:dd:ee:fg": "", "": "", "10.0.0.1": "", "aabbccddeeff00": "",
		"02:0A:FF:00:9B:C1": "02:0A:FF:00:9B:C1", "AA:BB:CC:DD:EE:FG": "", "AA:BB:CC:DD:EE:F:": "",
	} {
		got, err := NormalizeMAC(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("NormalizeMAC(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestDeadline(t *testing.T) {
	d, ok := Deadline("2026-12-31")
	if !ok || !d.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.Local)) {
		t.Errorf("date alone: %v %v, want the end of that day", d, ok)
	}
	d, ok = Deadline("2026-12-31 08:15")
	if !ok || !d.Equal(time.Date(2026, 12, 31, 8, 15, 0, 0, time.Local)) {
		t.Errorf("date and time: %v %v", d, ok)
	}
	if _, ok := Deadline("31.12.2026"); ok {
		t.Errorf("another form read")
	}
}

func TestLastAddr(t *testing.T) {
	for p, want := range map[string]string{"10.0.0.0/24": "10.0.0.255", "10.64.0.0/14": "10.67.255.255", "192.168.1.4/30": "192.168.1.7"} {
		if got := lastAddr(netip.MustParsePrefix(p)); got.String() != want {
			t.Errorf("lastAddr(%s) = %s, want %s", p, got, want)
		}
	}
}
