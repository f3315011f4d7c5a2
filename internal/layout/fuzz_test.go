package layout

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The checker behind every test fails drawings that break a promise, so a
// passing test means something.
func TestCheckDrawingCatches(t *testing.T) {
	nodes, edges := grid(6, 6, 5)
	good, err := Layout(nodes, edges, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := drawingProblem(nodes, edges, Options{}, good); err != nil {
		t.Fatal(err)
	}
	clone := func() Result {
		r := good
		r.Nodes = append([]Placed(nil), good.Nodes...)
		r.Edges = make([]Route, len(good.Edges))
		for k, e := range good.Edges {
			r.Edges[k] = Route{Edge: e.Edge, Points: append([]Point(nil), e.Points...)}
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		spoil func(r *Result)
		want  string
	}{
		{"overlap", func(r *Result) {
			// Same rank, the next one down moved up onto it.
			for i := range r.Nodes {
				for j := range r.Nodes {
					if r.Nodes[j].Rank == r.Nodes[i].Rank && r.Nodes[j].Order == r.Nodes[i].Order+1 {
						r.Nodes[j].Center.Y = r.Nodes[i].Center.Y + 1
						return
					}
				}
			}
		}, "overlap"},
		{"crossings miscounted", func(r *Result) { r.Crossings++ }, "Result.Crossings"},
		{"route off the border", func(r *Result) { r.Edges[0].Points[0].X -= 5 }, "not on the border"},
		{"route through a box", func(r *Result) {
			e := r.Edges[0]
			for _, p := range r.Nodes {
				if p.Rank == 1 && p.ID != e.To {
					e.Points = append([]Point{e.Points[0]}, append([]Point{p.Center}, e.Points[1:]...)...)
					r.Edges[0] = e
					return
				}
			}
		}, "runs through the box"},
		{"outside", func(r *Result) { r.Width /= 2 }, "out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clone()
			tc.spoil(&r)
			err := drawingProblem(nodes, edges, Options{}, r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one about %q", err, tc.want)
			}
		})
	}
}

// fuzzGraph decodes bytes into an acyclic graph: edges go from a lower to a
// higher hidden index, and the nodes are listed in an order of their own,
// so the input order is not a topological one. With cyclic set, one edge is
// added backwards, which makes a cycle.
func fuzzGraph(data []byte) (nodes []Node, edges []Edge, o Options, cyclic bool) {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	n := next() % 40
	flags := next()
	o.TopToBottom = flags&1 != 0
	cyclic = flags&2 != 0
	o.RankSep = float64(next() % 80)
	o.NodeSep = float64(next() % 40)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprint("n", i)
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	for i := range order {
		j := i + next()%(n-i)
		order[i], order[j] = order[j], order[i]
	}
	for _, i := range order {
		nodes = append(nodes, Node{ID: ids[i], Width: float64(next()), Height: float64(next() % 64)})
	}
	// Up to 150 edges: enough for every shape, while dense graphs, which
	// take the layout and the checker long, have a test of their own.
	for len(data) >= 2 && n > 1 && len(edges) < 150 {
		a, b := next()%n, next()%n
		if a == b {
			continue
		}
		edges = append(edges, Edge{ids[min(a, b)], ids[max(a, b)]})
	}
	if cyclic && len(edges) > 0 {
		e := edges[len(edges)/2]
		edges = append(edges, Edge{e.To, e.From})
	} else {
		cyclic = false
	}
	return nodes, edges, o, cyclic
}

func FuzzLayout(f *testing.F) {
	f.Add([]byte{4, 0, 0, 0, 0, 0, 0, 0, 120, 40, 120, 40, 100, 40, 80, 40, 0, 1, 0, 2, 1, 3, 2, 3})
	f.Add([]byte{12, 1, 10, 5, 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5, 0, 2, 8, 8, 4, 1, 9, 7, 1, 6, 9, 3, 9, 9, 3, 7, 5, 1, 0, 5, 8})
	f.Add([]byte{30, 2, 60, 24, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 29, 0, 15, 15, 29, 3, 9, 9, 27, 1, 2, 2, 3, 3, 4, 4, 5})
	f.Add([]byte{39, 3, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2})
	f.Add([]byte{1, 0, 0, 0, 0, 200, 63})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, edges, o, cyclic := fuzzGraph(data)
		res, err := Layout(nodes, edges, o)
		if cyclic {
			if !errors.Is(err, ErrCycle) {
				t.Fatalf("a graph with a cycle gave err = %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		checkDrawing(t, nodes, edges, o, res)
		again, err := Layout(nodes, edges, o)
		if err != nil || !reflect.DeepEqual(res, again) {
			t.Fatalf("the same input laid out differently (err %v)", err)
		}
	})
}
