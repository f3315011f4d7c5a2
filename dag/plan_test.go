package dag_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
)

// graph builds a workflow from "step: deps" pairs; deps prefixed with '!'
// are Needs, the others After.
func graph(t *testing.T, decl ...[2]string) *dag.Workflow {
	t.Helper()
	b := dag.New("g")
	for _, d := range decl {
		var after, needs []string
		for _, dep := range splitFields(d[1]) {
			if dep[0] == '!' {
				needs = append(needs, dep[1:])
			} else {
				after = append(after, dep)
			}
		}
		b.Step(d[0], noop, dag.After(after...), dag.Needs(needs...))
	}
	w, err := b.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return w
}

func splitFields(s string) []string {
	var out []string
	field := ""
	for _, r := range s + " " {
		if r == ' ' {
			if field != "" {
				out = append(out, field)
			}
			field = ""
			continue
		}
		field += string(r)
	}
	return out
}

// Shapes used by the plan tests.
var (
	// a -> b, a -> c, b+c -> d
	diamond = [][2]string{{"a", ""}, {"b", "a"}, {"c", "a"}, {"d", "b c"}}
	// root fans out to five branches of two steps, which join in sink.
	wide = [][2]string{
		{"root", ""},
		{"b1", "root"}, {"b2", "root"}, {"b3", "root"}, {"b4", "root"}, {"b5", "root"},
		{"c1", "b1"}, {"c2", "b2"}, {"c3", "b3"}, {"c4", "b4"}, {"c5", "b5"},
		{"sink", "c1 c2 c3 c4 c5"},
	}
)

func TestOrder(t *testing.T) {
	tests := []struct {
		name      string
		decl      [][2]string
		want      []string
		wantRoots []string
	}{
		{name: "single", decl: [][2]string{{"a", ""}}, want: []string{"a"}, wantRoots: []string{"a"}},
		{name: "diamond", decl: diamond, want: []string{"a", "b", "c", "d"}, wantRoots: []string{"a"}},
		{
			name: "declared backwards", decl: [][2]string{{"ship", "pack"}, {"pack", "pay"}, {"pay", ""}},
			want: []string{"pay", "pack", "ship"}, wantRoots: []string{"pay"},
		},
		{
			name: "ties broken by declaration order",
			decl: [][2]string{{"z", ""}, {"y", "x"}, {"x", ""}, {"w", "z"}},
			want: []string{"z", "x", "y", "w"}, wantRoots: []string{"z", "x"},
		},
		{
			name: "wide", decl: wide,
			want:      []string{"root", "b1", "b2", "b3", "b4", "b5", "c1", "c2", "c3", "c4", "c5", "sink"},
			wantRoots: []string{"root"},
		},
		{
			name: "independent roots", decl: [][2]string{{"a", ""}, {"b", ""}, {"c", "b"}},
			want: []string{"a", "b", "c"}, wantRoots: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := graph(t, tt.decl...)
			if diff := cmp.Diff(tt.want, w.Order()); diff != "" {
				t.Errorf("Order() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRoots, w.Roots()); diff != "" {
				t.Errorf("Roots() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDependents(t *testing.T) {
	w := graph(t, diamond...)
	tests := map[string][]string{"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": nil, "zz": nil}
	for name, want := range tests {
		if diff := cmp.Diff(want, w.Dependents(name)); diff != "" {
			t.Errorf("Dependents(%q) mismatch (-want +got):\n%s", name, diff)
		}
	}
}

func TestShouldSkip(t *testing.T) {
	w := graph(t, [2]string{"x", ""}, [2]string{"y", ""}, [2]string{"z", "x !y"})
	tests := []struct {
		step     string
		outcomes map[string]dag.Outcome
		want     bool
	}{
		{"z", map[string]dag.Outcome{"x": dag.Skipped, "y": dag.Succeeded}, false},
		{"z", map[string]dag.Outcome{"x": dag.Succeeded, "y": dag.Skipped}, true},
		{"z", nil, false},
		{"z", map[string]dag.Outcome{"x": dag.Succeeded, "y": dag.Failed}, false},
		{"x", map[string]dag.Outcome{"y": dag.Skipped}, false},
		{"nope", map[string]dag.Outcome{"y": dag.Skipped}, false},
	}
	for _, tt := range tests {
		if got := w.ShouldSkip(tt.step, tt.outcomes); got != tt.want {
			t.Errorf("ShouldSkip(%q, %v) = %v, want %v", tt.step, tt.outcomes, got, tt.want)
		}
	}
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool)
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestCompensationOrder(t *testing.T) {
	tests := []struct {
		name      string
		decl      [][2]string
		completed map[string]bool
		want      [][]string
	}{
		{name: "nothing completed", decl: diamond, completed: set(), want: nil},
		{name: "diamond, all but the join", decl: diamond, completed: set("a", "b", "c"), want: [][]string{{"c", "b"}, {"a"}}},
		{name: "diamond, one branch", decl: diamond, completed: set("a", "c"), want: [][]string{{"c"}, {"a"}}},
		{name: "diamond, all", decl: diamond, completed: set("a", "b", "c", "d"), want: [][]string{{"d"}, {"c", "b"}, {"a"}}},
		{
			name: "wide, branches of different depths in parallel", decl: wide,
			completed: set("root", "b1", "b2", "b3", "b4", "b5", "c1", "c3"),
			want:      [][]string{{"c3", "c1", "b5", "b4", "b2"}, {"b3", "b1"}, {"root"}},
		},
		{
			// A step completed downstream of a step that did not complete
			// (skipped) still holds back the steps above it.
			name: "transitive dependents through a skipped step", decl: [][2]string{{"a", ""}, {"b", "a"}, {"c", "b"}},
			completed: set("a", "c"),
			want:      [][]string{{"c"}, {"a"}},
		},
		{name: "independent roots", decl: [][2]string{{"a", ""}, {"b", ""}}, completed: set("a", "b"), want: [][]string{{"b", "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := graph(t, tt.decl...)
			if diff := cmp.Diff(tt.want, w.CompensationOrder(tt.completed)); diff != "" {
				t.Errorf("CompensationOrder() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompensationReady(t *testing.T) {
	w := graph(t, diamond...)
	tests := []struct {
		name                   string
		completed, compensated map[string]bool
		want                   []string
	}{
		{name: "leaves first", completed: set("a", "b", "c"), compensated: set(), want: []string{"c", "b"}},
		{name: "one branch done", completed: set("a", "b", "c"), compensated: set("b"), want: []string{"c"}},
		{name: "both branches done", completed: set("a", "b", "c"), compensated: set("b", "c"), want: []string{"a"}},
		{name: "everything compensated", completed: set("a", "b", "c"), compensated: set("a", "b", "c"), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, w.CompensationReady(tt.completed, tt.compensated)); diff != "" {
				t.Errorf("CompensationReady() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	got := []string{dag.Pending.String(), dag.Succeeded.String(), dag.Skipped.String(), dag.Failed.String(), dag.InProgress.String(), dag.Outcome(9).String()}
	want := []string{"pending", "succeeded", "skipped", "failed", "in progress", "Outcome(9)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("String() mismatch (-want +got):\n%s", diff)
	}
}
