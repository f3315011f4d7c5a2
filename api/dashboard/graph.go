package dashboard

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/internal/layout"
	"github.com/dagflow/dagflow/persistence"
)

// The DAG as SVG: the layout (ranks, order, coordinates, edge routes) is
// computed on the server (package internal/layout); the template draws boxes and
// paths. Needs edges are solid, After edges dashed; while a run
// compensates, or after it did, the undo order is drawn as reverse edges.

// graphView is a drawn DAG.
type graphView struct {
	Width, Height float64
	Nodes         []graphNode
	Edges         []graphEdge
	// Undo marks a compensating or compensated run: the undo order is
	// drawn (Edges of kind "undo").
	Undo bool
	// Crossings counts the pairs of plan edges that cross.
	Crossings int
}

type graphNode struct {
	Step string
	// Sub is the status line (status · ×attempts · duration), When the
	// step's condition; Lines are what the box shows: the name wrapped,
	// Sub, When wrapped.
	Sub      string
	When     string
	Lines    []graphLine
	Status   string
	X, Y     float64 // top left
	W, H     float64
	Href     string
	Selected bool
	Title    string
}

type graphEdge struct {
	From, To string
	Kind     string // "needs", "after" or "undo"
	Path     string
}

// planEdges returns each step's dependencies split into Needs and After,
// in plan order, from a definition.
type planStep struct {
	Name  string
	Deps  []string
	Needs map[string]bool
	Comp  bool
	When  string
}

func planOf(def dag.Definition) []planStep {
	out := make([]planStep, len(def.Steps))
	for i, s := range def.Steps {
		ps := planStep{Name: s.Name, Deps: s.Deps, Needs: map[string]bool{}, Comp: s.Compensation, When: s.When}
		for _, n := range s.Needs {
			ps.Needs[n] = true
		}
		out[i] = ps
	}
	return out
}

// planFromSteps is the plan of a run without a stored definition: every
// dependency drawn as After (the kind is not recorded on the steps).
func planFromSteps(sts []persistence.StepRun) []planStep {
	out := make([]planStep, len(sts))
	for i, s := range sts {
		out[i] = planStep{Name: s.Step, Deps: s.Deps, Needs: map[string]bool{}}
	}
	return out
}

// nodeState is what a box shows.
type nodeState struct {
	Status   string
	Attempts int
	Duration time.Duration
}

// buildGraph lays out plan and draws it; states colour the boxes (nil:
// the plan alone), href links each box, undo draws reverse edges between
// the steps whose compensation ran or waits. Each box is as large as its
// labels.
func buildGraph(plan []planStep, states map[string]nodeState, href func(step string) string, selected string, undo bool) (graphView, error) {
	boxes := make([]graphNode, len(plan))
	nodes := make([]layout.Node, len(plan))
	var edges []layout.Edge
	for i, s := range plan {
		boxes[i] = nodeLabels(s, states)
		nodes[i] = layout.Node{ID: s.Name, Width: boxes[i].W, Height: boxes[i].H}
		for _, d := range s.Deps {
			edges = append(edges, layout.Edge{From: d, To: s.Name})
		}
	}
	res, err := layout.Layout(nodes, edges, layout.Options{})
	if err != nil {
		return graphView{}, fmt.Errorf("dashboard: drawing the graph: %w", err)
	}
	const pad = 8.0
	g := graphView{Width: res.Width + 2*pad, Height: res.Height + 2*pad, Undo: undo, Crossings: res.Crossings}
	for i, p := range res.Nodes {
		n := boxes[i]
		n.X, n.Y = p.Center.X-p.Width/2+pad, p.Center.Y-p.Height/2+pad
		n.Selected = n.Step == selected
		if href != nil {
			n.Href = href(n.Step)
		}
		g.Nodes = append(g.Nodes, n)
	}
	g.Edges = planEdgesDrawn(plan, res, pad)
	if undo {
		g.Edges = append(g.Edges, undoEdges(plan, states, res, pad)...)
	}
	return g, nil
}

// nodeLabels is a step's box, not yet placed: its status, labels and
// the size they need.
func nodeLabels(s planStep, states map[string]nodeState) graphNode {
	n := graphNode{Step: s.Name, Status: "plan", When: s.When, Title: s.Name}
	if st, ok := states[s.Name]; ok {
		n.Status = st.Status
		parts := []string{st.Status}
		if st.Attempts > 0 {
			parts = append(parts, "×"+strconv.Itoa(st.Attempts))
		}
		if st.Duration > 0 {
			parts = append(parts, fmtDuration(st.Duration))
		}
		n.Sub = strings.Join(parts, " · ")
		n.Title = fmt.Sprintf("%s: %s", s.Name, n.Sub)
	} else if s.Comp {
		n.Sub = "compensable"
	}
	if s.When != "" {
		n.Title += " (when " + s.When + ")"
	}
	n.Lines = labelLines(s.Name, n.Sub, s.When)
	n.W, n.H = boxSize(n.Lines)
	return n
}

// planEdgesDrawn are the plan's edges along their routes, each Needs or
// After.
func planEdgesDrawn(plan []planStep, res layout.Result, pad float64) []graphEdge {
	kind := map[[2]string]string{}
	for _, s := range plan {
		for _, d := range s.Deps {
			k := "after"
			if s.Needs[d] {
				k = "needs"
			}
			kind[[2]string{d, s.Name}] = k
		}
	}
	var out []graphEdge
	for _, r := range res.Edges {
		out = append(out, graphEdge{From: r.From, To: r.To, Kind: kind[[2]string{r.From, r.To}], Path: polyline(r.Points, pad)})
	}
	return out
}

// undoEdges draw the undo order. It runs against the edges: a step is
// compensated after the steps that depend on it. It is drawn between the
// steps whose compensation ran, runs or is due, over the transitive
// relation: A -> B -> C with only A and C undone still undoes C before
// A. Each undone step gets an edge to its nearest undone ancestors,
// drawn back along the path to them.
func undoEdges(plan []planStep, states map[string]nodeState, res layout.Result, pad float64) []graphEdge {
	undone := func(step string) bool {
		switch persistence.StepStatus(states[step].Status) {
		case persistence.StepCompensating, persistence.StepCompensated, persistence.StepCompensationFailed:
			return true
		}
		return false
	}
	route := map[[2]string][]layout.Point{}
	for _, r := range res.Edges {
		route[[2]string{r.From, r.To}] = r.Points
	}
	deps := map[string][]string{}
	for _, s := range plan {
		deps[s.Name] = s.Deps
	}
	type back struct {
		step string
		pts  []layout.Point // the route from step to the undone one
	}
	var out []graphEdge
	for _, s := range plan {
		if !undone(s.Name) {
			continue
		}
		seen := map[string]bool{s.Name: true}
		queue := []back{{step: s.Name}}
		for len(queue) > 0 {
			it := queue[0]
			queue = queue[1:]
			for _, d := range deps[it.step] {
				if seen[d] {
					continue
				}
				seen[d] = true
				pts := append(append([]layout.Point(nil), route[[2]string{d, it.step}]...), it.pts...)
				if undone(d) {
					out = append(out, graphEdge{From: s.Name, To: d, Kind: "undo", Path: polyline(undoRoute(pts), pad)})
					continue
				}
				queue = append(queue, back{step: d, pts: pts})
			}
		}
	}
	return out
}

// undoRoute is an edge's route backwards, moved aside (perpendicular to
// the edge's overall direction) so that it does not hide the edge.
func undoRoute(pts []layout.Point) []layout.Point {
	const aside = 9.0
	n := len(pts)
	rev := make([]layout.Point, n)
	if n == 0 {
		return rev
	}
	dx, dy := pts[n-1].X-pts[0].X, pts[n-1].Y-pts[0].Y
	l := math.Hypot(dx, dy)
	if l == 0 {
		l = 1
	}
	ox, oy := -dy/l*aside, dx/l*aside
	for i, p := range pts {
		rev[n-1-i] = layout.Point{X: p.X + ox, Y: p.Y + oy}
	}
	return rev
}

func polyline(pts []layout.Point, pad float64) string {
	var b strings.Builder
	for i, p := range pts {
		if i == 0 {
			b.WriteString("M")
		} else {
			b.WriteString(" L")
		}
		fmt.Fprintf(&b, "%.1f %.1f", p.X+pad, p.Y+pad)
	}
	return b.String()
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
