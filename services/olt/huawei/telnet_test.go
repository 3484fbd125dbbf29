package huawei

import (
	"strings"
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

// FuzzSessionHelpers: the telnet filter and the echo stripping see raw
// bytes from the network and must not panic on any of them.
func FuzzSessionHelpers(f *testing.F) {
	f.Add([]byte{tIAC, tWILL, optEcho, 'a', tIAC, tSB, 1, tIAC, tSE}, "display board 0")
	f.Add([]byte("display board 0\r\n  SlotID\r\nOLT#"), "display board 0")
	f.Fuzz(func(t *testing.T, b []byte, cmd string) {
		data, _ := telnetFilter()(b)
		if len(data) > len(b) {
			t.Fatalf("filter grew the data: %d > %d", len(data), len(b))
		}
		stripEcho(strings.Split(string(b), "\n"), cmd, true)
		echoed(string(b), cmd, strings.Join(strings.Fields(cmd), ""))
		isPrompt(string(b))
	})
}
