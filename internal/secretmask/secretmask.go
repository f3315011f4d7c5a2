package secretmask

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Replace returns text with every place of secret that is not part of a
// longer word replaced by with. An empty secret changes nothing.
func Replace(text, secret, with string) string {
	if secret == "" || !strings.Contains(text, secret) {
		return text
	}
	first, _ := utf8.DecodeRuneInString(secret)
	last, _ := utf8.DecodeLastRuneInString(secret)
	glueBefore, glueAfter := wordRune(first), wordRune(last)
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, secret)
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		end := i + len(secret)
		inWord := glueBefore && wordBefore(text, len(text)-len(rest)+i) ||
			glueAfter && wordAfter(rest, end)
		b.WriteString(rest[:i])
		if inWord {
			// Keep the first rune and look again after it: a later,
			// overlapping place may stand alone.
			_, n := utf8.DecodeRuneInString(rest[i:])
			b.WriteString(rest[i : i+n])
			rest = rest[i+n:]
			continue
		}
		b.WriteString(with)
		rest = rest[end:]
	}
}

// wordBefore reports whether the rune of text that ends at i is a word
// rune.
func wordBefore(text string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(text[:i])
	return wordRune(r)
}

// wordAfter reports whether the rune of s that starts at i is a word rune.
func wordAfter(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return wordRune(r)
}

// wordRune reports whether r continues a word: a letter, a digit or '_'.
func wordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}
