package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"order", "order"},
		{strings.Repeat("a", Max), strings.Repeat("a", Max)},
		{strings.Repeat("a", Max+1), strings.Repeat("a", Max) + "…(65 bytes)"},
		{strings.Repeat("a", 100_000), strings.Repeat("a", Max) + "…(100000 bytes)"},
		// A cut inside a character keeps the whole characters before it.
		{strings.Repeat("a", Max-1) + "é" + "z", strings.Repeat("a", Max-1) + "…(66 bytes)"},
	} {
		got := String(tc.in)
		if got != tc.want {
			t.Errorf("String(%.80q) = %q, want %q", tc.in, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("String(%.80q) = %q is not valid UTF-8", tc.in, got)
		}
	}
}

func TestIn(t *testing.T) {
	long := strings.Repeat("x", 100)
	if got, want := In(`parsing "`+long+`": cannot parse "`+long+`"`, long), `parsing "`+String(long)+`": cannot parse "`+String(long)+`"`; got != want {
		t.Errorf("In = %q, want %q", got, want)
	}
	if got := In(`bad "abc"`, "abc"); got != `bad "abc"` {
		t.Errorf("In with a short value = %q, want the message unchanged", got)
	}
}
