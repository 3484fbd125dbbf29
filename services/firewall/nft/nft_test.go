package nft_test

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/services/firewall/nft"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

func el(p string, comment string) nft.Element {
	pf, err := netip.ParsePrefix(p)
	if err != nil {
		a := netip.MustParseAddr(p)
		pf = netip.PrefixFrom(a, a.BitLen())
	}
	return nft.Element{Prefix: pf, Comment: comment}
}

func list(t *testing.T, ns *netns.NS) string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed")
	}
	return testenv.Run(t, ns, "nft", "list", "table", "inet", nft.Table)
}

// The table written twice from the same state lists the same; element
// changes show in the listing and read back as prefixes.
func TestRebuildAndElements(t *testing.T) {
	ns := testenv.Netns(t)
	k, err := nft.Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	st := nft.State{
		Ports:     []uint16{8880, 8881},
		Protected: true,
		Block4:    []nft.Element{el("10.0.0.5", "aa:bb:cc:dd:ee:ff")},
		Block6:    []nft.Element{el("2001:db8:1::/56", "aa:bb:cc:dd:ee:ff"), el("2001:db8::9", "x")},
		Allow4:    []nft.Element{el("192.0.2.0/24", "office"), el("198.51.100.7", "")},
		Ban4:      []nft.Element{{Prefix: netip.MustParsePrefix("203.0.113.9/32"), Timeout: time.Hour}},
	}
	if err := k.Rebuild(st); err != nil {
		t.Fatal(err)
	}
	first := list(t, ns)
	t.Log(first)
	if err := k.Rebuild(st); err != nil {
		t.Fatal(err)
	}
	// Ban timeouts count down between listings: compare without them.
	strip := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if i := strings.Index(l, "expires"); i >= 0 {
				l = l[:i]
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	}
	if diff := cmp.Diff(strip(first), strip(list(t, ns))); diff != "" {
		t.Errorf("second rebuild changed the table (-first +second):\n%s", diff)
	}
	got, err := k.Elements(nft.SetBlock6)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"2001:db8::9/128", "2001:db8:1::/56"}
	var gotS []string
	for _, e := range got {
		gotS = append(gotS, e.Prefix.String())
	}
	if diff := cmp.Diff(want, gotS); diff != "" {
		t.Errorf("block6 (-want +got):\n%s", diff)
	}
	if err := k.Change(func(b *nft.Batch) {
		b.Delete(nft.SetBlock4, el("10.0.0.5", ""))
		b.Add(nft.SetBlock4, el("10.0.0.6", "next"))
		b.Delete(nft.SetBlock6, el("2001:db8:1::/56", ""))
		b.Sync(nft.SetAllow4, nft.Cover(st.Allow4), nft.Cover(append(st.Allow4, el("0.0.0.0/0", "everyone"))))
		b.Protect(false)
	}); err != nil {
		t.Fatal(err)
	}
	out := list(t, ns)
	for _, w := range []string{"10.0.0.6", "0.0.0.0/0"} {
		if !strings.Contains(out, w) {
			t.Errorf("listing lacks %s:\n%s", w, out)
		}
	}
	if strings.Contains(out, "10.0.0.5") || strings.Contains(out, "2001:db8:1::/56") {
		t.Errorf("listing still has deleted elements:\n%s", out)
	}
	a, err := k.Elements(nft.SetAllow4)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 1 || a[0].Prefix.String() != "0.0.0.0/0" {
		t.Errorf("allow4 = %v", a)
	}
	// A failed batch changes nothing: deleting an absent element fails
	// the whole transaction.
	err = k.Change(func(b *nft.Batch) {
		b.Add(nft.SetBlock4, el("10.0.0.7", ""))
		b.Delete(nft.SetBlock4, el("10.9.9.9", ""))
	})
	if err == nil {
		t.Fatal("deleting an absent element succeeded")
	}
	if strings.Contains(list(t, ns), "10.0.0.7") {
		t.Error("the failed batch's addition stayed")
	}
}
