// Package clip shortens the values that callers give (names, keys, ids,
// specs, paths) when an error message quotes them, so that a 100 KB value
// is not echoed back in full: [String] keeps the first [Max] bytes and
// names the length, as in "abc…(100001 bytes)". It imports only the
// standard library, so that any package may use it.
package clip

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Max is how many bytes of a value an error quotes.
const Max = 64

// String returns s when it is at most Max bytes, else its first Max bytes
// (cut back to a whole UTF-8 character) followed by "…(N bytes)", N being
// len(s).
func String(s string) string {
	if len(s) <= Max {
		return s
	}
	cut := Max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// In returns msg with every occurrence of value, when value is over Max
// bytes, replaced by String(value): for a foreign error message (a
// parser's, say) that quotes the value in full.
func In(msg, value string) string {
	if len(value) <= Max {
		return msg
	}
	return strings.ReplaceAll(msg, value, String(value))
}
