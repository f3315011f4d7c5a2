package yamlwalk_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/dagflow/dagflow/internal/yamlwalk"
)

var errUnknown = errors.New("unknown field")

func newWalker() *yamlwalk.Walker {
	return &yamlwalk.Walker{
		UnknownField: errUnknown,
		NewError: func(line, column int, field string, err error) error {
			return fmt.Errorf("%d:%d: %s: %w", line, column, field, err)
		},
	}
}

// problems lists the walker's problems, one message each.
func problems(w *yamlwalk.Walker) []string {
	var out []string
	err := w.Err()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
	} else if err != nil {
		out = append(out, err.Error())
	}
	return out
}

func TestFieldsResolvesAliasesAndReportsUnknownAndRepeatedKeys(t *testing.T) {
	src := `a: &x 1
b: *x
c: {d: *x}
a: 2
e: 3
`
	w := newWalker()
	root := w.Document([]byte(src), "a mapping", "one per file")
	if root == nil {
		t.Fatal(w.Err())
	}
	got := map[string]int{}
	w.Fields(root, "", []string{"a", "b", "c"}, func(key string, _, v *yaml.Node) {
		switch key {
		case "c":
			if w.Mapping(v, key, "a mapping") {
				w.Fields(v, key, []string{"d"}, func(key string, _, v *yaml.Node) {
					got["c."+key], _ = w.Int(v, "c."+key)
				})
			}
		default:
			got[key], _ = w.Int(v, key)
		}
	})
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c.d": 1}, got); diff != "" {
		t.Errorf("values mismatch (-want +got):\n%s", diff)
	}
	want := []string{
		"4:1: a: repeated field",
		"5:1: e: unknown field (want one of [a b c])",
	}
	if diff := cmp.Diff(want, problems(w)); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}
	if !errors.Is(w.Err(), errUnknown) {
		t.Errorf("errors.Is(err, UnknownField) = false for %v", w.Err())
	}
}

func TestDocumentRootMayBeAnAlias(t *testing.T) {
	w := newWalker()
	root := w.Document([]byte("&r {a: 1}\n"), "a mapping", "one per file")
	if root == nil || root.Kind != yaml.MappingNode {
		t.Fatalf("Document() = %v, %v", root, w.Err())
	}
}

func TestScalarsAndLists(t *testing.T) {
	src := `s: &s text
i: many
f: [1]
d: 90s
bad: 90
l: [*s, [x]]
n: null
`
	w := newWalker()
	root := w.Document([]byte(src), "a mapping", "one per file")
	v := map[string]*yaml.Node{}
	w.Fields(root, "", []string{"s", "i", "f", "d", "bad", "l", "n"}, func(key string, _, n *yaml.Node) { v[key] = n })
	if s, ok := w.Str(v["s"], "s"); !ok || s != "text" {
		t.Errorf("Str = %q, %v", s, ok)
	}
	if d, ok := w.Duration(v["d"], "d"); !ok || d.Seconds() != 90 {
		t.Errorf("Duration = %v, %v", d, ok)
	}
	w.Int(v["i"], "i")
	w.Float(v["f"], "f")
	w.Duration(v["bad"], "bad")
	w.Str(v["n"], "n")
	items, ok := w.List(v["l"], "l", "a list")
	if !ok || len(items) != 2 {
		t.Fatalf("List = %v, %v", items, ok)
	}
	if s, ok := w.Str(items[0], "l[0]"); !ok || s != "text" {
		t.Errorf("aliased item: Str = %q, %v", s, ok)
	}
	w.Str(items[1], "l[1]")
	w.List(v["s"], "s", "a list of things")
	want := []string{
		`2:4: i: want an integer, got "many"`,
		`3:4: f: want a number, got a list`,
		`5:6: bad: want a duration like "30s" or "1m30s", got "90"`,
		`7:4: n: want a string, got null`,
		`6:9: l[1]: want a string, got a list`,
		`1:4: s: want a list of things, got "text"`,
	}
	if diff := cmp.Diff(want, problems(w)); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}
}

func TestDocumentProblems(t *testing.T) {
	tests := []struct{ src, want string }{
		{"", "0:0: : empty document"},
		{"a: [\n", "1:0: : did not find expected node content"},
		{"- a\n", "1:1: : want a mapping, got a list"},
		{"a: 1\n---\na: 2\n", "2:1: : more than one YAML document (one per file)"},
	}
	for _, tt := range tests {
		w := newWalker()
		if root := w.Document([]byte(tt.src), "a mapping", "one per file"); root != nil {
			t.Errorf("Document(%q) = %v, want nil", tt.src, root)
		}
		if err := w.Err(); err == nil || err.Error() != tt.want {
			t.Errorf("Document(%q) error = %v, want %s", tt.src, err, tt.want)
		}
	}
}
