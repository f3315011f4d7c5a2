package docscheck

import (
	"regexp"
	"strings"
)

// span is one backticked code span of the doc.
type span struct {
	text string
	line int    // the doc's line it starts on
	glue string // the text between the previous span of its unit and it, spaces collapsed
}

// unit is a stretch of the doc whose spans are read together: a prose
// paragraph, or a table row's cell.
type unit struct {
	spans []span
	pkgs  []string // the packages a bare file name is looked up in; none in prose
	row   []string // the files of an engine component's row, which its unexported names are pinned to
}

var (
	spanRe = regexp.MustCompile("`([^`\n]*)`")
	fileRe = regexp.MustCompile(`^[A-Za-z0-9_.*/-]+\.(go|lua|yaml|yml|sql|json|txt|sh)$`)
	nameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)?(\(.*\))?$`)
	wsRe   = regexp.MustCompile(`\s+`)
)

func isFile(s string) bool { return fileRe.MatchString(s) }
func isName(s string) bool { return !isFile(s) && nameRe.MatchString(s) }

// bareName is a name span without its call parentheses: Stats() is Stats.
func bareName(s string) string {
	if i := strings.IndexByte(s, '('); i >= 0 {
		return s[:i]
	}
	return s
}

// spansOf are the code spans of text, whose first line is the doc's line
// first.
func spansOf(text string, first int) []span {
	var out []span
	prev := 0
	for _, m := range spanRe.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, span{
			text: text[m[2]:m[3]],
			line: first + strings.Count(text[:m[0]], "\n"),
			glue: wsRe.ReplaceAllString(text[prev:m[0]], " "),
		})
		prev = m[1]
	}
	return out
}

// tableFilePkg is the package of the files a table's "file" column names,
// by the section the table is in.
var tableFilePkg = map[string]string{"The engine's components": "engine"}

// units cuts the doc into units: each paragraph of prose, and each
// table row's cells. Fenced blocks (the package diagram) are left out.
// A table under a heading tableFilePkg does not know is an error.
func units(doc string) ([]unit, []problem) {
	var out []unit
	var bad []problem
	var para strings.Builder
	paraLine, section, fenced := 0, "", false
	var header []string
	flush := func() {
		if para.Len() > 0 {
			out = append(out, unit{spans: spansOf(para.String(), paraLine)})
			para.Reset()
		}
	}
	for i, l := range strings.Split(doc, "\n") {
		line := i + 1
		trimmed := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flush()
			fenced = !fenced
		case fenced:
		case strings.HasPrefix(trimmed, "#"):
			flush()
			section = strings.TrimSpace(strings.TrimLeft(trimmed, "#"))
			header = nil
		case strings.HasPrefix(trimmed, "|"):
			flush()
			cells := strings.Split(strings.Trim(trimmed, "|"), "|")
			switch {
			case header == nil:
				header = cells
			case !strings.HasPrefix(strings.TrimSpace(cells[0]), "---"):
				u, p := tableRow(header, cells, line, section)
				out, bad = append(out, u...), append(bad, p...)
			}
		case trimmed == "":
			flush()
			header = nil
		default:
			if para.Len() == 0 {
				paraLine = line
			}
			para.WriteString(l + "\n")
		}
	}
	flush()
	return out, bad
}

// tableRow reads a table row: the cells of a "package" column name the
// packages its bare file names are in; the files of a "file" column are
// in the package tableFilePkg gives the section, and pin the row's
// unexported names.
func tableRow(header, cells []string, line int, section string) ([]unit, []problem) {
	var pkgs, row []string
	for k, h := range header {
		if k >= len(cells) {
			break
		}
		switch strings.TrimSpace(h) {
		case "package":
			for _, s := range spansOf(cells[k], line) {
				pkgs = append(pkgs, s.text)
			}
		case "file":
			pkg, ok := tableFilePkg[section]
			if !ok {
				return nil, []problem{{line, "", "a table with a file column under \"" + section + "\": say in tableFilePkg which package its files are in"}}
			}
			pkgs = []string{pkg}
			for _, s := range spansOf(cells[k], line) {
				row = append(row, pkg+"/"+s.text)
			}
		}
	}
	var out []unit
	for _, c := range cells {
		out = append(out, unit{spans: spansOf(c, line), pkgs: pkgs, row: row})
	}
	return out, nil
}

// pins are the names of a unit that its text pins to a file, by span
// index: the index of the file span each one is pinned to.
//
//	`Name` (`file.go`...)     `Name`, `file.go`
//	`A`, `B` and `C` in `file.go`   (also `A`/`B`)
//	(`file.go`, `A`, `B`)     `file.go`'s `Name`
func pins(s []span) map[int]int {
	out := map[int]int{}
	for i := range s {
		if !isFile(s[i].text) {
			continue
		}
		if i > 0 && isName(s[i-1].text) && (s[i].glue == " (" || s[i].glue == ", ") {
			out[i-1] = i
		}
		if s[i].glue == " in " {
			for j := i - 1; j >= 0 && isName(s[j].text); j-- {
				out[j] = i
				if g := s[j].glue; j > 0 && g != ", " && g != " and " && g != ", and " && g != "/" {
					break
				}
			}
		}
		if strings.HasSuffix(s[i].glue, "(") {
			for j := i + 1; j < len(s) && isName(s[j].text) && s[j].glue == ", "; j++ {
				out[j] = i
			}
		}
		if i+1 < len(s) && s[i+1].glue == "'s " && isName(s[i+1].text) {
			out[i+1] = i
		}
	}
	return out
}
