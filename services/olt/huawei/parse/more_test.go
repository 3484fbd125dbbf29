package parse

import "testing"

// The OLT prints the More prompt at the start of a line and the next row
// after erasing it: no blank line may be left where a page ended (it
// would move with every change above it, and show in configuration
// diffs).
func TestCleanLeavesNoBlankLineAtPageBreak(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"a\r\nb\r\n" + MoreMarker + "\x1b[37D                                     \x1b[37Dc\r\nd", "a\nb\nc\nd"},
		{"a\r\nb\r\n" + MoreMarker + "c", "a\nb\nc"},
		{"a b " + MoreMarker + "\x1b[37D \x1b[37Dc", "a b\nc"},
	} {
		if got, _ := Clean(c.raw); got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}
