package opt82

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/services/dhcp/config"
)

func TestParseHuaweiCircuitID(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Port
		wantErr bool
	}{
		{in: "MA5800-POP17 xpon 0/1/0:5.1.116", want: Port{AccessNode: "MA5800-POP17", Slot: 1, ONTID: 5}},
		{in: "OLT1 gpon 0/2/15:127", want: Port{AccessNode: "OLT1", Slot: 2, Port: 15, ONTID: 127}},
		{in: "OLT1 xpon 0/0/3/7:12.0.200", want: Port{AccessNode: "OLT1", Slot: 3, Port: 7, ONTID: 12}},
		{in: "OLT1 0/1/0:5", want: Port{AccessNode: "OLT1", Slot: 1, ONTID: 5}},
		{in: "OLT1", wantErr: true},
		{in: "OLT1 xpon 0/1/0", wantErr: true},
		{in: "OLT1 xpon 0/1:5", wantErr: true},
		{in: "OLT1 xpon 0/x/0:5", wantErr: true},
		{in: "OLT1 xpon 0/1/0:abc", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := ParseHuaweiCircuitID(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseHuaweiCircuitID(%q) err = %v, wantErr %v", tc.in, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseHuaweiCircuitID(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParse(t *testing.T) {
	raw := []byte{1, 3, 'a', 'b', 'c', 2, 2, 'x', 'y', 9, 0}
	got, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.CircuitID) != "abc" || string(got.RemoteID) != "xy" {
		t.Errorf("Parse = %q %q", got.CircuitID, got.RemoteID)
	}
	for _, bad := range [][]byte{{1}, {1, 5, 'a'}, {2, 1}} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%v) accepted a truncated option", bad)
		}
	}
}

func TestServiceLookup(t *testing.T) {
	l := NewServiceLookup([]config.Service{
		{ID: "svc_00000001", OLT: "OLT1", PON: "0/1/0", ONTID: 5, IPv4: netip.MustParseAddr("10.0.0.5")},
		{ID: "svc_00000002", PON: "0/1/0", ONTID: 6, SN: "48575443ABCDEF01", IPv4: netip.MustParseAddr("10.0.0.6")},
	})
	for _, tc := range []struct {
		cid, rid string
		want     string
	}{
		{"OLT1 xpon 0/1/0:5.1.116", "", "10.0.0.5"},
		{"OLT2 xpon 0/1/0:5.1.116", "", ""}, // another OLT's port 0/1/0
		{"OLT9 xpon 0/1/0:6", "", "10.0.0.6"},
		{"garbage", "48575443abcdef01", "10.0.0.6"},
		{"garbage", "nope", ""},
	} {
		m, ok := l.Lookup([]byte(tc.cid), []byte(tc.rid))
		got := ""
		if ok {
			got = m.IPv4.String()
		}
		if got != tc.want {
			t.Errorf("Lookup(%q, %q) = %q, want %q", tc.cid, tc.rid, got, tc.want)
		}
	}
}
