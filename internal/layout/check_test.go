package layout

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
)

// eps absorbs float rounding in the geometric checks.
const eps = 1e-6

// checkDrawing holds a Result to what Layout promises for any valid input,
// by geometry alone: every node placed as given inside the drawing, no two
// boxes overlapping, every edge running from its source's border to its
// target's without entering a box, ranks increasing along every edge, Order
// following the centres, and Crossings equal to the crossings of the drawn
// routes.
func checkDrawing(t testing.TB, nodes []Node, edges []Edge, o Options, res Result) {
	t.Helper()
	if err := drawingProblem(nodes, edges, o, res); err != nil {
		t.Fatal(err)
	}
}

type box struct{ x0, y0, x1, y1 float64 }

func boxOf(p Placed) box {
	return box{p.Center.X - p.Width/2, p.Center.Y - p.Height/2, p.Center.X + p.Width/2, p.Center.Y + p.Height/2}
}

func drawingProblem(nodes []Node, edges []Edge, o Options, res Result) error {
	if len(res.Nodes) != len(nodes) {
		return fmt.Errorf("%d nodes placed, want %d", len(res.Nodes), len(nodes))
	}
	if len(res.Edges) != len(edges) {
		return fmt.Errorf("%d edges routed, want %d", len(res.Edges), len(edges))
	}
	if res.Crossings < 0 {
		return fmt.Errorf("Crossings = %d", res.Crossings)
	}
	index := map[string]int{}
	boxes := make([]box, len(nodes))
	for i, p := range res.Nodes {
		if p.Node != nodes[i] {
			return fmt.Errorf("Nodes[%d] = %+v, want %+v", i, p.Node, nodes[i])
		}
		index[p.ID] = i
		b := boxOf(p)
		boxes[i] = b
		if !inside(Point{b.x0, b.y0}, res) || !inside(Point{b.x1, b.y1}, res) {
			return fmt.Errorf("node %q at %+v sticks out of the %gx%g drawing", p.ID, b, res.Width, res.Height)
		}
		if p.Rank < 0 {
			return fmt.Errorf("node %q has rank %d", p.ID, p.Rank)
		}
	}
	for i := range boxes {
		for j := i + 1; j < len(boxes); j++ {
			a, b := boxes[i], boxes[j]
			if a.x0 < b.x1-eps && b.x0 < a.x1-eps && a.y0 < b.y1-eps && b.y0 < a.y1-eps {
				return fmt.Errorf("boxes of %q %+v and %q %+v overlap", nodes[i].ID, a, nodes[j].ID, b)
			}
		}
	}
	// Order runs along the centres of each rank, across the rank axis.
	byRank := map[int][]int{}
	for i, p := range res.Nodes {
		byRank[p.Rank] = append(byRank[p.Rank], i)
	}
	for r, is := range byRank {
		seen := make([]bool, len(is))
		for _, i := range is {
			p := res.Nodes[i]
			if p.Order < 0 || p.Order >= len(is) || seen[p.Order] {
				return fmt.Errorf("rank %d: node %q has order %d (bad or repeated among %d)", r, p.ID, p.Order, len(is))
			}
			seen[p.Order] = true
			for _, j := range is {
				q := res.Nodes[j]
				if p.Order < q.Order && across(p.Center, o) >= across(q.Center, o) {
					return fmt.Errorf("rank %d: %q (order %d) is not before %q (order %d)", r, p.ID, p.Order, q.ID, q.Order)
				}
			}
		}
	}

	type seg struct {
		a, b Point
		edge int
	}
	var segs []seg
	distinct := map[Edge]bool{}
	for k, rt := range res.Edges {
		if rt.Edge != edges[k] {
			return fmt.Errorf("Edges[%d] = %+v, want %+v", k, rt.Edge, edges[k])
		}
		u, v := index[rt.From], index[rt.To]
		if res.Nodes[u].Rank >= res.Nodes[v].Rank {
			return fmt.Errorf("edge %q -> %q goes from rank %d to rank %d", rt.From, rt.To, res.Nodes[u].Rank, res.Nodes[v].Rank)
		}
		if len(rt.Points) < 2 {
			return fmt.Errorf("edge %q -> %q has %d points", rt.From, rt.To, len(rt.Points))
		}
		first, last := rt.Points[0], rt.Points[len(rt.Points)-1]
		if !onBorder(first, boxes[u]) {
			return fmt.Errorf("edge %q -> %q starts at %+v, not on the border of %+v", rt.From, rt.To, first, boxes[u])
		}
		if !onBorder(last, boxes[v]) {
			return fmt.Errorf("edge %q -> %q ends at %+v, not on the border of %+v", rt.From, rt.To, last, boxes[v])
		}
		for p := range rt.Points {
			if !inside(rt.Points[p], res) {
				return fmt.Errorf("edge %q -> %q: point %+v is outside the drawing", rt.From, rt.To, rt.Points[p])
			}
			if p == 0 {
				continue
			}
			a, b := rt.Points[p-1], rt.Points[p]
			for i, bx := range boxes {
				if throughBox(a, b, bx) {
					return fmt.Errorf("edge %q -> %q: segment %+v-%+v runs through the box of %q %+v", rt.From, rt.To, a, b, nodes[i].ID, bx)
				}
			}
			if !distinct[rt.Edge] {
				segs = append(segs, seg{a, b, k})
			}
		}
		distinct[rt.Edge] = true
	}
	// Sweep along x: only segments whose x ranges overlap can cross.
	lo := func(s seg) float64 { return min(s.a.X, s.b.X) }
	hi := func(s seg) float64 { return max(s.a.X, s.b.X) }
	slices.SortFunc(segs, func(p, q seg) int { return cmp.Compare(lo(p), lo(q)) })
	crossings := 0
	for i := range segs {
		for j := i + 1; j < len(segs) && lo(segs[j]) <= hi(segs[i]); j++ {
			if segs[i].edge != segs[j].edge && properCross(segs[i].a, segs[i].b, segs[j].a, segs[j].b) {
				crossings++
			}
		}
	}
	if crossings != res.Crossings {
		return fmt.Errorf("the routes cross %d times, Result.Crossings = %d", crossings, res.Crossings)
	}
	return nil
}

func across(p Point, o Options) float64 {
	if o.TopToBottom {
		return p.X
	}
	return p.Y
}

func inside(p Point, res Result) bool {
	return p.X >= -eps && p.Y >= -eps && p.X <= res.Width+eps && p.Y <= res.Height+eps
}

func onBorder(p Point, b box) bool {
	in := p.X >= b.x0-eps && p.X <= b.x1+eps && p.Y >= b.y0-eps && p.Y <= b.y1+eps
	edge := math.Abs(p.X-b.x0) < eps || math.Abs(p.X-b.x1) < eps || math.Abs(p.Y-b.y0) < eps || math.Abs(p.Y-b.y1) < eps
	return in && edge
}

// throughBox reports whether segment a-b enters the open interior of b
// (Liang–Barsky clipping against the box shrunk by eps).
func throughBox(a, b Point, bx box) bool {
	x0, y0, x1, y1 := bx.x0+eps, bx.y0+eps, bx.x1-eps, bx.y1-eps
	if x0 >= x1 || y0 >= y1 {
		return false
	}
	t0, t1 := 0.0, 1.0
	dx, dy := b.X-a.X, b.Y-a.Y
	for _, c := range [][2]float64{{-dx, a.X - x0}, {dx, x1 - a.X}, {-dy, a.Y - y0}, {dy, y1 - a.Y}} {
		p, q := c[0], c[1]
		if p == 0 {
			if q <= 0 {
				return false
			}
			continue
		}
		r := q / p
		if p < 0 {
			t0 = max(t0, r)
		} else {
			t1 = min(t1, r)
		}
	}
	return t0 < t1
}

// properCross reports whether segments p1-p2 and q1-q2 cross at a point
// inside both (touching or running along each other does not count).
func properCross(p1, p2, q1, q2 Point) bool {
	d1 := orient(q1, q2, p1)
	d2 := orient(q1, q2, p2)
	d3 := orient(p1, p2, q1)
	d4 := orient(p1, p2, q2)
	return d1*d2 < 0 && d3*d4 < 0
}

func orient(a, b, c Point) float64 {
	v := (b.X-a.X)*(c.Y-a.Y) - (b.Y-a.Y)*(c.X-a.X)
	if math.Abs(v) < eps {
		return 0
	}
	return v
}
