package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text from the store (errors, outputs, inputs, names) is written by step
// handlers and callers, so it may hold terminal escape sequences: ESC
// sequences that set the window title, clear the screen or rewrite what
// was printed, or bidirectional overrides that make text read other than
// it is. The CLI prints it escaped, in Go's notation:
//
//   - C0 controls and DEL as \x1b, \x07, ...; in table cells also tab,
//     newline and carriage return, so a cell stays one cell (cells show a
//     value's first line only, see firstLine);
//   - C1 controls (U+0080-U+009F, among them the one-byte CSI U+009B) as
//     \u009b;
//   - invisible format characters that reorder or hide text (bidi marks,
//     embeddings, overrides and isolates, zero-width characters, line and
//     paragraph separators, BOM) as \u202e and the like;
//   - bytes that are not UTF-8 as \xff.
//
// escapeBlock, for multi-line values printed on their own (a run's error),
// keeps newlines and tabs so that a stack trace stays readable. A
// backslash is printed as it is: escaped output is for reading, not for
// parsing back.

// escapeLine escapes s for one line of output (a table cell).
func escapeLine(s string) string { return escape(s, false) }

// escapeBlock escapes s for a block of lines: newlines and tabs stay.
func escapeBlock(s string) string { return escape(s, true) }

func escape(s string, block bool) string {
	if !needsEscape(s, block) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case block && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string, block bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || ((r < 0x20 || r == 0x7f) && !(block && (r == '\n' || r == '\t'))) || hidden(r) {
			return true
		}
		i += size
	}
	return false
}

// hidden reports a C1 control or an invisible format character that can
// reorder or hide text.
func hidden(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x200b && r <= 0x200f, // zero-width space, joiners, LRM, RLM
		r >= 0x2028 && r <= 0x202e, // line/paragraph separators, embeddings, overrides
		r >= 0x2060 && r <= 0x2069, // word joiner, invisible operators, isolates
		r == 0x061c, r == 0xfeff:   // Arabic letter mark, BOM
		return true
	}
	return false
}

// cell is a store value for a table cell: its first line, escaped.
func cell(s string) string { return escapeLine(firstLine(s)) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
