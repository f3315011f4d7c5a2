package dashboard

import (
	"math"
	"strings"
)

// A box's labels are drawn in a monospace font (app.css: Liberation
// Mono first, which CI installs with Chromium), so their width is known
// on the server: characters × font size × charEm. Liberation Mono and
// DejaVu Sans Mono advance 0.6 em; charEm leaves a little over.
const (
	charEm = 0.62
	// nameSize and smallSize are the font sizes (px) of a box's step
	// name and of its other lines (status, when), as app.css sets them.
	nameSize  = 13.0
	smallSize = 11.0
	// labelPadX is the space left and right of the labels; labelTop the
	// space above the first line, labelBottom below the last.
	labelPadX   = 10.0
	labelTop    = 6.0
	labelBottom = 8.0
	// nameWrap and whenWrap are the longest lines, in characters, of a
	// step name and of a when condition; longer ones wrap.
	nameWrap = 28
	whenWrap = 34
	// minNodeW is the narrowest box.
	minNodeW = 156.0
)

// graphLine is one line of text in a box: its class (name, sub, when)
// and its baseline's offset from the box's top.
type graphLine struct {
	Class string
	Text  string
	DY    float64
}

// lineHeight is the height a line of a class takes in a box.
func lineHeight(class string) float64 {
	if class == "name" {
		return 17
	}
	return 15
}

func fontSize(class string) float64 {
	if class == "name" {
		return nameSize
	}
	return smallSize
}

// labelLines are a box's lines: the step name wrapped, its status
// (sub, may be empty), its when condition wrapped.
func labelLines(name, sub, when string) []graphLine {
	var out []graphLine
	for _, l := range wrapLabel(name, nameWrap) {
		out = append(out, graphLine{Class: "name", Text: l})
	}
	if sub != "" {
		out = append(out, graphLine{Class: "sub", Text: sub})
	}
	if when != "" {
		for _, l := range wrapLabel("when: "+when, whenWrap) {
			out = append(out, graphLine{Class: "when", Text: l})
		}
	}
	y := labelTop
	for i := range out {
		h := lineHeight(out[i].Class)
		out[i].DY = y + h - 4
		y += h
	}
	return out
}

// boxSize is the size of the box that holds lines.
func boxSize(lines []graphLine) (w, h float64) {
	w, h = minNodeW, labelTop+labelBottom
	for _, l := range lines {
		tw := float64(len([]rune(l.Text)))*fontSize(l.Class)*charEm + 2*labelPadX
		w = max(w, math.Ceil(tw))
		h += lineHeight(l.Class)
	}
	return w, h
}

// wrapLabel cuts s into lines of at most n characters whose
// concatenation is s: after the last '_', '-', '.' or space of a line
// when there is one in its second half, else at n.
func wrapLabel(s string, n int) []string {
	r := []rune(s)
	var out []string
	for len(r) > n {
		cut := n
		for i := n; i > n/2; i-- {
			if strings.ContainsRune("_-. ", r[i-1]) {
				cut = i
				break
			}
		}
		out = append(out, string(r[:cut]))
		r = r[cut:]
	}
	return append(out, string(r))
}
