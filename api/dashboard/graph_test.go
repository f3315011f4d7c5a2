package dashboard

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
)

// TestBuildGraph: Needs and After edges keep their kinds; the undo order
// is drawn, reversed, between the steps whose compensation ran, only
// when asked; every box gets its state.
func TestBuildGraph(t *testing.T) {
	def := dag.Definition{Name: "order", Steps: []dag.StepDefinition{
		{Name: "reserve", Compensation: true},
		{Name: "notify", Deps: []string{"reserve"}},
		{Name: "points", Deps: []string{"reserve"}, Compensation: true},
		{Name: "ship", Deps: []string{"reserve", "notify", "points"}, Needs: []string{"reserve"}},
	}}
	states := map[string]nodeState{
		"reserve": {Status: "compensated", Attempts: 2}, "notify": {Status: "succeeded", Attempts: 1},
		"points": {Status: "compensated", Attempts: 2}, "ship": {Status: "dead", Attempts: 1},
	}
	type edge struct{ From, To, Kind string }
	edges := func(g graphView) []edge {
		var out []edge
		for _, e := range g.Edges {
			out = append(out, edge{e.From, e.To, e.Kind})
		}
		return out
	}
	plain := []edge{
		{"reserve", "notify", "after"}, {"reserve", "points", "after"},
		{"reserve", "ship", "needs"}, {"notify", "ship", "after"}, {"points", "ship", "after"},
	}
	g, err := buildGraph(planOf(def), states, nil, "ship", false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(plain, edges(g)); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
	if g.Crossings != 0 || len(g.Nodes) != 4 || !g.Nodes[3].Selected || g.Nodes[3].Status != "dead" || g.Nodes[3].Sub != "dead · ×1" {
		t.Errorf("graph %+v", g)
	}
	g, err = buildGraph(planOf(def), states, nil, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(plain, edge{"points", "reserve", "undo"}), edges(g)); diff != "" {
		t.Errorf("edges while compensated (-want +got):\n%s", diff)
	}
	// The undo edge runs from points' side to reserve's.
	undo, fwd := g.Edges[len(g.Edges)-1], g.Edges[1]
	if undo.Path == fwd.Path || undo.Path[:1] != "M" {
		t.Errorf("undo path %q, forward %q", undo.Path, fwd.Path)
	}
	// A(compensable) -> B(plain) -> C(compensable): C is undone before A,
	// though no edge joins them.
	chain := []planStep{{Name: "A", Comp: true}, {Name: "B", Deps: []string{"A"}}, {Name: "C", Deps: []string{"B"}, Comp: true}, {Name: "D", Deps: []string{"C"}}}
	g, err = buildGraph(chain, map[string]nodeState{"A": {Status: "compensated"}, "B": {Status: "succeeded"}, "C": {Status: "compensated"}, "D": {Status: "dead"}}, nil, "", true)
	if err != nil {
		t.Fatal(err)
	}
	want := []edge{{"A", "B", "after"}, {"B", "C", "after"}, {"C", "D", "after"}, {"C", "A", "undo"}}
	if diff := cmp.Diff(want, edges(g)); diff != "" {
		t.Errorf("edges of a compensated chain through a plain step (-want +got):\n%s", diff)
	}
	if p := g.Edges[3].Path; p == "" || p[:1] != "M" {
		t.Errorf("the undo edge C->A has no path: %q", p)
	}
	if _, err := buildGraph([]planStep{{Name: "a", Deps: []string{"b"}}, {Name: "b", Deps: []string{"a"}}}, nil, nil, "", false); err == nil {
		t.Error("a cycle was drawn")
	}
}

// TestGraphBoxesFitTheirLabels: a 64-character step name wraps into
// lines of at most 28 characters that join back into the name, a when
// condition gets its own line, and each box is at least as wide as its
// longest line in a 0.6 em monospace font, and tall enough for its lines.
func TestGraphBoxesFitTheirLabels(t *testing.T) {
	long := "reconcile_the_ledger_with_the_settlement_report_of_each_provider"
	plan := []planStep{{Name: "a"}, {Name: long, Deps: []string{"a"}, When: "input.total >= 100", Comp: true}}
	g, err := buildGraph(plan, map[string]nodeState{"a": {Status: "compensation_failed", Attempts: 12, Duration: 83 * time.Second}}, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range g.Nodes {
		var name string
		var bottom float64
		for _, l := range n.Lines {
			if l.Class == "name" {
				name += l.Text
				if len(l.Text) > 28 {
					t.Errorf("%s: name line %q is longer than 28", n.Step, l.Text)
				}
			}
			size := 11.0
			if l.Class == "name" {
				size = 13
			}
			if w := float64(len([]rune(l.Text)))*size*0.6 + 2*10; w > n.W {
				t.Errorf("%s: line %q needs %.1f px, its box is %.1f", n.Step, l.Text, w, n.W)
			}
			if l.DY <= bottom {
				t.Errorf("%s: line %q at %.1f is not below the one before (%.1f)", n.Step, l.Text, l.DY, bottom)
			}
			bottom = l.DY
		}
		if name != n.Step {
			t.Errorf("the box of %q is named %q", n.Step, name)
		}
		if bottom+4 > n.H {
			t.Errorf("%s: its last line's baseline %.1f does not fit its %.1f px box", n.Step, bottom, n.H)
		}
	}
	if l := g.Nodes[0].Lines; len(l) != 2 || l[1].Text != "compensation_failed · ×12 · 1m23s" {
		t.Errorf("a's lines: %+v", l)
	}
	if l := g.Nodes[1].Lines; len(l) != 5 || l[3].Text != "compensable" || l[4] != (graphLine{Class: "when", Text: "when: input.total >= 100", DY: l[4].DY}) {
		t.Errorf("the long step's lines: %+v, want three of name, compensable and its when", l)
	}
}
