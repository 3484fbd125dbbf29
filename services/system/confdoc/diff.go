package confdoc

import (
	"fmt"
	"strings"
)

// context is how many unchanged lines a hunk shows around a change.
const diffContext = 3

// maxDiffWork bounds the Myers search (edit distance D costs O((N+M)·D)):
// past it the document is shown as wholly replaced.
const maxDiffWork = 50_000_000

// Diff is the unified diff from a to b of every document, in path order,
// headed "--- a/<path>" / "+++ b/<path>" as diff -u prints them; "" when
// they are equal. Callers mask secrets first.
func Diff(a, b Docs, fromLabel, toLabel string) string {
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	var sb strings.Builder
	for _, p := range Paths(boolDocs(paths)) {
		ca, inA := a[p]
		cb, inB := b[p]
		if inA && inB && ca == cb {
			continue
		}
		from, to := "a/"+p, "b/"+p
		if !inA {
			from = "/dev/null"
		}
		if !inB {
			to = "/dev/null"
		}
		fmt.Fprintf(&sb, "--- %s\t%s\n+++ %s\t%s\n", from, fromLabel, to, toLabel)
		sb.WriteString(unified(lines(ca), lines(cb)))
	}
	return sb.String()
}

func boolDocs(m map[string]bool) Docs {
	d := make(Docs, len(m))
	for k := range m {
		d[k] = ""
	}
	return d
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

type opKind byte

const (
	opEq  opKind = ' '
	opDel        = '-'
	opIns        = '+'
)

type edit struct {
	kind opKind
	line string
}

// script is the shortest edit script from a to b (Myers), or delete-all
// then insert-all when the search would cost more than maxDiffWork.
func script(a, b []string) []edit {
	// Common prefix and suffix first: the usual change is small.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []edit
	for _, l := range a[:pre] {
		out = append(out, edit{opEq, l})
	}
	out = append(out, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		out = append(out, edit{opEq, l})
	}
	return out
}

func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	replaceAll := func() []edit {
		out := make([]edit, 0, n+m)
		for _, l := range a {
			out = append(out, edit{opDel, l})
		}
		for _, l := range b {
			out = append(out, edit{opIns, l})
		}
		return out
	}
	if n == 0 || m == 0 {
		return replaceAll()
	}
	max := n + m
	off := max
	v := make([]int, 2*max+2)
	var trace [][]int
	work := 0
	for d := 0; d <= max; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, a, b, off, d)
			}
		}
		work += (2*max + 2) + 2*d
		if work > maxDiffWork {
			return replaceAll()
		}
	}
	return replaceAll()
}

func backtrack(trace [][]int, a, b []string, off, dEnd int) []edit {
	x, y := len(a), len(b)
	var rev []edit
	for d := dEnd; d > 0; d-- {
		v := trace[d]
		k := x - y
		var pk int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := v[off+pk]
		py := px - pk
		for x > px && y > py {
			rev = append(rev, edit{opEq, a[x-1]})
			x, y = x-1, y-1
		}
		if x == px {
			rev = append(rev, edit{opIns, b[y-1]})
			y--
		} else {
			rev = append(rev, edit{opDel, a[x-1]})
			x--
		}
	}
	for x > 0 && y > 0 {
		rev = append(rev, edit{opEq, a[x-1]})
		x, y = x-1, y-1
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

// unified renders the edit script from a to b as hunks with context.
func unified(a, b []string) string {
	es := script(a, b)
	var sb strings.Builder
	i := 0
	for i < len(es) {
		// find the next change
		for i < len(es) && es[i].kind == opEq {
			i++
		}
		if i == len(es) {
			break
		}
		start := max(0, i-diffContext)
		end := i
		// extend while changes are within 2*context of each other
		for end < len(es) {
			if es[end].kind != opEq {
				end++
				continue
			}
			j := end
			for j < len(es) && es[j].kind == opEq {
				j++
			}
			if j == len(es) || j-end > 2*diffContext {
				end = min(end+diffContext, len(es))
				break
			}
			end = j
		}
		// line numbers of the hunk's start
		la, lb := 1, 1
		for _, e := range es[:start] {
			if e.kind != opIns {
				la++
			}
			if e.kind != opDel {
				lb++
			}
		}
		na, nb := 0, 0
		for _, e := range es[start:end] {
			if e.kind != opIns {
				na++
			}
			if e.kind != opDel {
				nb++
			}
		}
		if na == 0 {
			la--
		}
		if nb == 0 {
			lb--
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", rangeOf(la, na), rangeOf(lb, nb))
		for _, e := range es[start:end] {
			sb.WriteByte(byte(e.kind))
			sb.WriteString(e.line)
			if !strings.HasSuffix(e.line, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return sb.String()
}

func rangeOf(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
