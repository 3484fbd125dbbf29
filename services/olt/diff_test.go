package olt

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// apply rebuilds b from a and the edits, and checks the script is a
// shortest one against a slow LCS.
func TestLineDiffRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 300; n++ {
		a := randLines(r, r.IntN(30))
		b := mutate(r, a)
		edits, ok := lineDiff(a, b)
		if !ok {
			t.Fatal("gave up")
		}
		var gotA, gotB []string
		changes := 0
		for _, e := range edits {
			if e.kind != add {
				gotA = append(gotA, e.text)
			}
			if e.kind != del {
				gotB = append(gotB, e.text)
			}
			if e.kind != same {
				changes++
			}
		}
		if strings.Join(gotA, "|") != strings.Join(a, "|") || strings.Join(gotB, "|") != strings.Join(b, "|") {
			t.Fatalf("edits do not rebuild:\na=%v\nb=%v\nedits=%v", a, b, edits)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); changes != want {
			t.Fatalf("%d changes, shortest is %d: a=%v b=%v", changes, want, a, b)
		}
	}
}

func randLines(r *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint("l", r.IntN(6))
	}
	return out
}

func mutate(r *rand.Rand, a []string) []string {
	var b []string
	for _, l := range a {
		switch r.IntN(5) {
		case 0:
		case 1:
			b = append(b, l, fmt.Sprint("n", r.IntN(6)))
		default:
			b = append(b, l)
		}
	}
	return b
}

func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func TestUnified(t *testing.T) {
	from := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	to := "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\nk\nl\n"
	got, added, removed := unified("rev 1", "now", from, to)
	want := `--- rev 1
+++ now
@@ -2,10 +2,11 @@
 b
 c
 d
-e
+E
 f
 g
 h
 i
 j
 k
+l
`
	if got != want || added != 2 || removed != 1 {
		t.Errorf("got (+%d -%d):\n%s\nwant:\n%s", added, removed, got, want)
	}
	if d, a, r := unified("x", "y", from, from); d != "" || a+r != 0 {
		t.Errorf("identical: %q", d)
	}
	// Two changes far apart are two hunks.
	long := strings.Repeat("x\n", 20)
	got, _, _ = unified("x", "y", "A\n"+long+"B\n", "a\n"+long+"b\n")
	if strings.Count(got, "@@ -") != 2 {
		t.Errorf("hunks:\n%s", got)
	}
}
