// Package mac holds the one rule for a MAC address's stored form, which
// the dhcp service's reservations and the subscribers' clients both key
// by: they must agree on it byte for byte.
package mac

import (
	"fmt"
	"strings"
)

// separators are the separators Normalize drops: one Replacer for every
// call (building one per call cost more than the rest of a restore's
// check of 100,000 clients).
var separators = strings.NewReplacer(":", "", "-", "", ".", "")

// Normalize accepts aa:bb:cc:dd:ee:ff, aa-bb-cc-dd-ee-ff, aabbccddeeff
// and aabb.ccdd.eeff in any case and returns AA:BB:CC:DD:EE:FF.
func Normalize(s string) (string, error) {
	if canonical(s) {
		return s, nil
	}
	h := separators.Replace(strings.TrimSpace(s))
	if len(h) != 12 {
		return "", fmt.Errorf("invalid MAC %q", s)
	}
	var b strings.Builder
	b.Grow(17)
	for i := 0; i < 12; i++ {
		c := h[i]
		switch {
		case c >= '0' && c <= '9', c >= 'A' && c <= 'F':
		case c >= 'a' && c <= 'f':
			c -= 'a' - 'A'
		default:
			return "", fmt.Errorf("invalid MAC %q", s)
		}
		if i > 0 && i%2 == 0 {
			b.WriteByte(':')
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// canonical reports whether s is already AA:BB:CC:DD:EE:FF (upper-case
// hex, colons): Normalize returns it as it is, without building it again
// (an import normalises every MAC of a document that holds them so:
// 100,000 of them, twice).
func canonical(s string) bool {
	if len(s) != 17 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i%3 == 2 {
			if c != ':' {
				return false
			}
		} else if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
