package huawei

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTelnetFilter(t *testing.T) {
	for _, c := range []struct {
		name              string
		in                [][]byte
		wantData, wantRep string
	}{
		{"plain", [][]byte{[]byte("OLT>")}, "OLT>", ""},
		{"will echo and sga", [][]byte{{tIAC, tWILL, optEcho, tIAC, tWILL, optSGA}, []byte(">>User name:")},
			">>User name:", string([]byte{tIAC, tDO, optEcho, tIAC, tDO, optSGA})},
		{"refuse other options", [][]byte{{tIAC, tDO, 31, tIAC, tWILL, 24}}, "", string([]byte{tIAC, tWONT, 31, tIAC, tDONT, 24})},
		{"escaped 255", [][]byte{{'a', tIAC, tIAC, 'b'}}, "a\xffb", ""},
		{"subnegotiation skipped", [][]byte{{'x', tIAC, tSB, 24, 1, 2, tIAC, tSE, 'y'}}, "xy", ""},
		{"split across reads", [][]byte{{'a', tIAC}, {tWILL}, {optEcho, 'b'}}, "ab", string([]byte{tIAC, tDO, optEcho})},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := telnetFilter()
			var data, rep []byte
			for _, chunk := range c.in {
				d, r := f(chunk)
				data, rep = append(data, d...), append(rep, r...)
			}
			if diff := cmp.Diff(c.wantData, string(data)); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantRep, string(rep)); diff != "" {
				t.Errorf("replies (-want +got):\n%s", diff)
			}
		})
	}
}
