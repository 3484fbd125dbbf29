package shaper

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"routerd.dev/shared/testenv"
)

// TestElemCountsOf: the gets of a count set's elements answer every key
// the set holds, over several requests, whatever keys it does not hold
// (a subscriber removed since the keys were taken), and agree with a dump
// of the set.
func TestElemCountsOf(t *testing.T) {
	ns := testenv.Netns(t)
	var els []string
	var keys [][]byte
	for i := 0; i < 600; i++ {
		a := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		b := a.As4()
		keys = append(keys, b[:])
		if i%97 == 5 {
			continue // not in the set
		}
		els = append(els, fmt.Sprintf("%s counter packets %d bytes %d", a, i, i*100))
	}
	rules := "table inet " + tableName + " {\n set " + setCnt4 + " { type ipv4_addr; counter; elements = { " + strings.Join(els, ", ") + " } }\n}\n"
	file := filepath.Join(t.TempDir(), "t.nft")
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, ns, "nft", "-f", file)
	sock, err := newNfSock(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.close()
	got, err := sock.elemCountsOf(setCnt4, keys)
	if err != nil {
		t.Fatal(err)
	}
	dumped, err := sock.elemCounts(setCnt4)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(els) || len(dumped) != len(els) {
		t.Fatalf("%d elements by gets, %d by the dump, want %d", len(got), len(dumped), len(els))
	}
	for i, k := range keys {
		c, ok := got[string(k)]
		if i%97 == 5 {
			if ok {
				t.Errorf("key %v not in the set answered: %+v", k, c)
			}
			continue
		}
		if want := (elemCount{bytes: uint64(i * 100), packets: uint64(i)}); c != want || dumped[string(k)] != want {
			t.Errorf("key %v: got %+v, dumped %+v, want %+v", k, c, dumped[string(k)], want)
		}
	}
}
