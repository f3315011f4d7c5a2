package dashboard

import (
	"testing"

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
	if _, err := buildGraph([]planStep{{Name: "a", Deps: []string{"b"}}, {Name: "b", Deps: []string{"a"}}}, nil, nil, "", false); err == nil {
		t.Error("a cycle was drawn")
	}
}
