package layout

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// orderNodes and orderEdges are the order workflow of examples/orderflow:
// reserve, then notify and points, then ship after both.
var (
	orderNodes = []Node{
		{ID: "reserve", Width: 120, Height: 40},
		{ID: "notify", Width: 120, Height: 40},
		{ID: "points", Width: 100, Height: 40},
		{ID: "ship", Width: 80, Height: 40},
	}
	orderEdges = []Edge{
		{"reserve", "notify"}, {"reserve", "points"}, {"notify", "ship"}, {"points", "ship"},
	}
)

func ranksOf(res Result) map[string]int {
	m := map[string]int{}
	for _, p := range res.Nodes {
		m[p.ID] = p.Rank
	}
	return m
}

func placed(res Result, id string) Placed {
	for _, p := range res.Nodes {
		if p.ID == id {
			return p
		}
	}
	panic("no node " + id)
}

func TestOrderWorkflow(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"left to right", Options{}},
		{"top to bottom", Options{TopToBottom: true}},
		{"wide gaps", Options{RankSep: 100, NodeSep: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Layout(orderNodes, orderEdges, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			checkDrawing(t, orderNodes, orderEdges, tc.o, res)
			if res.Crossings != 0 {
				t.Errorf("Crossings = %d, want 0", res.Crossings)
			}
			want := map[string]int{"reserve": 0, "notify": 1, "points": 1, "ship": 2}
			if diff := cmp.Diff(want, ranksOf(res)); diff != "" {
				t.Errorf("ranks (-want +got):\n%s", diff)
			}
			o, _ := tc.o.withDefaults()
			reserve, notify, points, ship := placed(res, "reserve"), placed(res, "notify"), placed(res, "points"), placed(res, "ship")
			// reserve and ship on one line, notify and points either side of
			// it, one NodeSep apart.
			if a, b := across(reserve.Center, o), across(ship.Center, o); math.Abs(a-b) > eps {
				t.Errorf("reserve at %v and ship at %v are not on one line", a, b)
			}
			mid := (across(notify.Center, o) + across(points.Center, o)) / 2
			if a := across(reserve.Center, o); math.Abs(a-mid) > eps {
				t.Errorf("reserve at %v, not between notify and points (%v)", a, mid)
			}
			size := notify.Height
			if o.TopToBottom {
				size = (notify.Width + points.Width) / 2
			}
			if gap := math.Abs(across(notify.Center, o)-across(points.Center, o)) - size; math.Abs(gap-o.NodeSep) > eps {
				t.Errorf("notify and points are %v apart, want NodeSep %v", gap, o.NodeSep)
			}
			// Ranks are RankSep apart: the columns are as wide as their
			// widest box.
			wantLen := 120 + o.RankSep + 120 + o.RankSep + 80
			gotLen, gotAcross := res.Width, res.Height
			if o.TopToBottom {
				wantLen = 40 + o.RankSep + 40 + o.RankSep + 40
				gotLen, gotAcross = res.Height, res.Width
			}
			if gotLen != wantLen {
				t.Errorf("drawing is %v long, want %v", gotLen, wantLen)
			}
			wantAcross := 40 + o.NodeSep + 40
			if o.TopToBottom {
				wantAcross = 120 + o.NodeSep + 100
			}
			if math.Abs(gotAcross-wantAcross) > eps {
				t.Errorf("drawing is %v across, want %v", gotAcross, wantAcross)
			}
		})
	}
}

// TopToBottom is the left-to-right drawing of the boxes turned on their
// side: the same ranks and orders, x and y swapped.
func TestTopToBottomTransposes(t *testing.T) {
	nodes, edges := grid(16, 16, 7)
	turned := make([]Node, len(nodes))
	for i, n := range nodes {
		turned[i] = Node{ID: n.ID, Width: n.Height, Height: n.Width}
	}
	lr, err := Layout(nodes, edges, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Layout(turned, edges, Options{TopToBottom: true})
	if err != nil {
		t.Fatal(err)
	}
	checkDrawing(t, turned, edges, Options{TopToBottom: true}, tb)
	if lr.Width != tb.Height || lr.Height != tb.Width || lr.Crossings != tb.Crossings {
		t.Fatalf("left to right %vx%v with %d crossings, top to bottom %vx%v with %d", lr.Width, lr.Height, lr.Crossings, tb.Width, tb.Height, tb.Crossings)
	}
	for i := range lr.Nodes {
		a, b := lr.Nodes[i], tb.Nodes[i]
		if a.Center != (Point{b.Center.Y, b.Center.X}) || a.Rank != b.Rank || a.Order != b.Order {
			t.Fatalf("node %q: left to right %+v, top to bottom %+v", a.ID, a, b)
		}
	}
	for k := range lr.Edges {
		a, b := lr.Edges[k].Points, tb.Edges[k].Points
		if len(a) != len(b) {
			t.Fatalf("edge %v: %d points left to right, %d top to bottom", lr.Edges[k].Edge, len(a), len(b))
		}
		for p := range a {
			if a[p] != (Point{b[p].Y, b[p].X}) {
				t.Fatalf("edge %v point %d: %+v left to right, %+v top to bottom", lr.Edges[k].Edge, p, a[p], b[p])
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	nodes, edges := grid(16, 16, 3)
	first, err := Layout(nodes, edges, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := Layout(nodes, edges, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first, again) {
			t.Fatal("the same input gave two different layouts")
		}
	}
}

func TestErrors(t *testing.T) {
	n := func(ids ...string) []Node {
		var ns []Node
		for _, id := range ids {
			ns = append(ns, Node{ID: id, Width: 10, Height: 10})
		}
		return ns
	}
	for _, tc := range []struct {
		name  string
		nodes []Node
		edges []Edge
		o     Options
		is    error
		msg   string
	}{
		{"cycle", n("a", "b", "c", "d"), []Edge{{"a", "b"}, {"b", "c"}, {"c", "d"}, {"d", "b"}}, Options{}, ErrCycle,
			`layout: cycle through node "b": b -> c -> d -> b`},
		{"cycle after a diamond", n("x", "y", "z", "p", "q"), []Edge{{"x", "y"}, {"x", "z"}, {"y", "p"}, {"z", "p"}, {"p", "q"}, {"q", "p"}}, Options{}, ErrCycle,
			`layout: cycle through node "p": p -> q -> p`},
		{"self loop", n("a", "b"), []Edge{{"a", "b"}, {"b", "b"}}, Options{}, ErrCycle,
			`layout: cycle through node "b": b -> b`},
		{"unknown target", n("a", "b"), []Edge{{"a", "b"}, {"b", "pack"}}, Options{}, ErrUnknownNode,
			`layout: unknown node "pack" in edge "b" -> "pack"`},
		{"unknown source", n("a", "b"), []Edge{{"pack", "a"}}, Options{}, ErrUnknownNode,
			`layout: unknown node "pack" in edge "pack" -> "a"`},
		{"duplicate id", n("a", "b", "a"), nil, Options{}, ErrDuplicateID,
			`layout: duplicate node id "a" (nodes 0 and 2)`},
		{"negative width", []Node{{ID: "a", Width: -1, Height: 10}}, nil, Options{}, ErrBadSize,
			`layout: bad size: node "a": width -1 is not a finite size in [0, 1e+06]`},
		{"NaN height", []Node{{ID: "a", Width: 1, Height: math.NaN()}}, nil, Options{}, ErrBadSize,
			`layout: bad size: node "a": height NaN is not a finite size in [0, 1e+06]`},
		{"infinite width", []Node{{ID: "a", Width: math.Inf(1), Height: 1}}, nil, Options{}, ErrBadSize,
			`layout: bad size: node "a": width +Inf is not a finite size in [0, 1e+06]`},
		{"negative RankSep", n("a"), nil, Options{RankSep: -5}, ErrBadSize,
			`layout: bad size: RankSep -5 is not a finite gap in (0, 1e+06]`},
		{"NaN NodeSep", n("a"), nil, Options{NodeSep: math.NaN()}, ErrBadSize,
			`layout: bad size: NodeSep NaN is not a finite gap in (0, 1e+06]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Layout(tc.nodes, tc.edges, tc.o)
			if !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			if err.Error() != tc.msg {
				t.Errorf("err = %q\nwant  %q", err, tc.msg)
			}
			if !reflect.DeepEqual(res, Result{}) {
				t.Errorf("a failed layout returned %+v", res)
			}
		})
	}
}

// The cycle message names a node on the cycle, wherever the cycle is.
func TestCycleNamesANodeOnIt(t *testing.T) {
	nodes, edges := grid(8, 8, 11)
	// Close a cycle from the last node back to one of its ancestors.
	last := nodes[len(nodes)-1].ID
	var parent string
	for _, e := range edges {
		if e.To == last {
			parent = e.From
		}
	}
	edges = append(edges, Edge{last, parent})
	_, err := Layout(nodes, edges, Options{})
	if !errors.Is(err, ErrCycle) {
		t.Fatalf("err = %v, want ErrCycle", err)
	}
	for _, id := range []string{last, parent} {
		if !strings.Contains(err.Error(), `"`+id+`"`) && !strings.Contains(err.Error(), " "+id+" ") {
			t.Errorf("err = %q does not name %s", err, id)
		}
	}
}

// The order workflow as workflows/order.yaml declares it, where ship also
// needs reserve: that edge skips a rank, runs straight through a lane
// between notify and points, and crosses nothing.
func TestOrderWorkflowWithNeeds(t *testing.T) {
	edges := append(slices.Clone(orderEdges), Edge{"reserve", "ship"})
	for _, o := range []Options{{}, {TopToBottom: true}} {
		res, err := Layout(orderNodes, edges, o)
		if err != nil {
			t.Fatal(err)
		}
		checkDrawing(t, orderNodes, edges, o, res)
		if res.Crossings != 0 {
			t.Errorf("Crossings = %d, want 0", res.Crossings)
		}
		want := map[string]int{"reserve": 0, "notify": 1, "points": 1, "ship": 2}
		if diff := cmp.Diff(want, ranksOf(res)); diff != "" {
			t.Errorf("ranks (-want +got):\n%s", diff)
		}
		oo, _ := o.withDefaults()
		line := across(placed(res, "reserve").Center, oo)
		for _, p := range res.Edges[4].Points {
			if math.Abs(across(p, oo)-line) > eps {
				t.Errorf("reserve -> ship leaves reserve's line: %v", res.Edges[4].Points)
				break
			}
		}
		n, p := across(placed(res, "notify").Center, oo), across(placed(res, "points").Center, oo)
		if !(min(n, p) < line && line < max(n, p)) {
			t.Errorf("the lane at %v is not between notify (%v) and points (%v)", line, n, p)
		}
	}
}
