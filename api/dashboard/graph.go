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

const (
	nodeW = 156.0
	nodeH = 46.0
)

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
	Step     string
	Label    string
	Sub      string
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
}

func planOf(def dag.Definition) []planStep {
	out := make([]planStep, len(def.Steps))
	for i, s := range def.Steps {
		ps := planStep{Name: s.Name, Deps: s.Deps, Needs: map[string]bool{}, Comp: s.Compensation}
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
// the steps whose compensation ran or waits.
func buildGraph(plan []planStep, states map[string]nodeState, href func(step string) string, selected string, undo bool) (graphView, error) {
	nodes := make([]layout.Node, len(plan))
	var edges []layout.Edge
	for i, s := range plan {
		nodes[i] = layout.Node{ID: s.Name, Width: nodeW, Height: nodeH}
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
		s := plan[i]
		n := graphNode{Step: s.Name, Label: shorten(s.Name, 20), Status: "plan", W: p.Width, H: p.Height,
			X: p.Center.X - p.Width/2 + pad, Y: p.Center.Y - p.Height/2 + pad, Selected: s.Name == selected, Title: s.Name}
		if href != nil {
			n.Href = href(s.Name)
		}
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
		g.Nodes = append(g.Nodes, n)
	}
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
	for _, r := range res.Edges {
		g.Edges = append(g.Edges, graphEdge{From: r.From, To: r.To, Kind: kind[[2]string{r.From, r.To}], Path: polyline(r.Points, pad)})
	}
	if undo {
		// The undo order runs against the edges: a step is compensated
		// after the steps that depend on it. Draw it between the steps
		// whose compensation ran, runs or is due.
		undone := func(step string) bool {
			switch persistence.StepStatus(states[step].Status) {
			case persistence.StepCompensating, persistence.StepCompensated, persistence.StepCompensationFailed:
				return true
			}
			return false
		}
		for _, r := range res.Edges {
			if undone(r.From) && undone(r.To) {
				rev := undoRoute(r.Points)
				g.Edges = append(g.Edges, graphEdge{From: r.To, To: r.From, Kind: "undo", Path: polyline(rev, pad)})
			}
		}
	}
	return g, nil
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
