package olt

import (
	"fmt"
	"strings"
)

// editKind is one line of a line diff.
type editKind byte

const (
	same editKind = ' '
	del  editKind = '-'
	add  editKind = '+'
)

type edit struct {
	kind editKind
	text string
}

// maxEdits bounds the diff's work (Myers' D): past it two configurations
// are reported as wholly replaced rather than searched for longer.
const maxEdits = 4000

// lineDiff is Myers' shortest edit script between a and b, in O((N+M)D)
// time and O(D²) memory; ok is false past maxEdits.
func lineDiff(a, b []string) (edits []edit, ok bool) {
	n, m := len(a), len(b)
	max := n + m
	off := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	var x, y, D int
	found := false
	for d := 0; d <= max && !found; d++ {
		if d > maxEdits {
			return nil, false
		}
		for k := -d; k <= d; k += 2 {
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y = x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found, D = true, d
				break
			}
		}
		if !found {
			trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
		}
	}
	x, y = n, m
	for d := D; d > 0; d-- {
		prev := trace[d-1]
		at := func(k int) int { return prev[k+d-1] }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			x--
			y--
			edits = append(edits, edit{same, a[x]})
		}
		if x == px { // down: b[py] inserted
			edits = append(edits, edit{add, b[py]})
		} else { // right: a[px] deleted
			edits = append(edits, edit{del, a[px]})
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		x--
		y--
		edits = append(edits, edit{same, a[x]})
	}
	for i, j := 0, len(edits)-1; i < j; i, j = i+1, j-1 {
		edits[i], edits[j] = edits[j], edits[i]
	}
	return edits, true
}

// unified renders a diff of two texts in the unified format with three
// lines of context, and counts the lines added and removed.
func unified(fromName, toName, from, to string) (text string, added, removed int) {
	a, b := splitLines(from), splitLines(to)
	edits, ok := lineDiff(a, b)
	if !ok {
		edits = nil
		for _, l := range a {
			edits = append(edits, edit{del, l})
		}
		for _, l := range b {
			edits = append(edits, edit{add, l})
		}
	}
	var out strings.Builder
	const ctx = 3
	ai, bi := 0, 0 // line numbers (0-based) at edits[i]
	type pos struct{ i, a, b int }
	var starts []pos
	for i, e := range edits {
		starts = append(starts, pos{i, ai, bi})
		switch e.kind {
		case same:
			ai++
			bi++
		case del:
			ai++
			removed++
		case add:
			bi++
			added++
		}
	}
	if added+removed == 0 {
		return "", 0, 0
	}
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromName, toName)
	i := 0
	for i < len(edits) {
		if edits[i].kind == same {
			i++
			continue
		}
		// A hunk: from ctx lines before this change to ctx lines after
		// the last change closer than 2*ctx to the one before.
		lo := max(0, i-ctx)
		hi := i
		for j := i; j < len(edits); j++ {
			if edits[j].kind != same {
				hi = j
				continue
			}
			if j-hi > 2*ctx {
				break
			}
		}
		end := min(len(edits), hi+ctx+1)
		p := starts[lo]
		var na, nb int
		for _, e := range edits[lo:end] {
			if e.kind != add {
				na++
			}
			if e.kind != del {
				nb++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", p.a+1, na, p.b+1, nb)
		for _, e := range edits[lo:end] {
			out.WriteByte(byte(e.kind))
			out.WriteString(e.text)
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String(), added, removed
}

func splitLines(s string) []string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
