package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// block is a fenced code block of the README.
type block struct {
	lang string // the info string after the opening fence: go, sh, console
	line int    // the README's line of its first line of code
	text string // its lines, each ending in a newline
}

// readme is the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of the README's section headed heading ("## Quick
// start"), up to the next heading of the same level, and the line it
// starts on.
func section(t *testing.T, md, heading string) (string, int) {
	t.Helper()
	start := strings.Index(md, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	start++
	text := md[start:]
	level := heading[:strings.IndexByte(heading, ' ')+1] // "## "
	if end := strings.Index(text[len(heading):], "\n"+level); end >= 0 {
		text = text[:len(heading)+end+1]
	}
	return text, strings.Count(md[:start], "\n") + 1
}

// fencedBlocks are the ``` blocks of md, whose first line is line first
// of the README. An unclosed block is an error.
func fencedBlocks(t *testing.T, md string, first int) []block {
	t.Helper()
	var blocks []block
	var cur *block
	for i, l := range strings.SplitAfter(md, "\n") {
		trimmed := strings.TrimRight(l, "\n")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{lang: strings.TrimSpace(trimmed[3:]), line: first + i + 1}
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += trimmed + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("README.md:%d: a ```%s block is not closed", cur.line-1, cur.lang)
	}
	return blocks
}
