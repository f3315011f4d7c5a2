package layout

import (
	"math"
	"slices"
)

// result turns the layered graph into the drawing: centres, routes and size,
// in the requested direction.
func (g *graph) result(nodes []Node, edges []Edge, o Options) Result {
	// Across the ranks, the drawing starts at 0.
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, it := range g.items {
		lo = min(lo, g.x[i]-it.across/2)
		hi = max(hi, g.x[i]+it.across/2)
	}
	if len(g.items) == 0 {
		lo, hi = 0, 0
	}
	var length float64
	if r := len(g.layers) - 1; r >= 0 {
		length = g.rankStart[r] + g.rankSize[r]
	}
	// pt maps (along, across) to the requested direction.
	pt := func(along, across float64) Point {
		if o.TopToBottom {
			return Point{X: across - lo, Y: along}
		}
		return Point{X: along, Y: across - lo}
	}

	res := Result{Nodes: make([]Placed, len(nodes)), Edges: make([]Route, len(edges))}
	res.Width, res.Height = length, hi-lo
	if o.TopToBottom {
		res.Width, res.Height = hi-lo, length
	}
	for _, l := range g.layers {
		order := 0
		for _, i := range l {
			it := g.items[i]
			if it.real < 0 {
				continue
			}
			res.Nodes[it.real] = Placed{
				Node:   nodes[it.real],
				Center: pt(g.rankStart[it.rank]+g.rankSize[it.rank]/2, g.x[i]),
				Rank:   it.rank,
				Order:  order,
			}
			order++
		}
	}

	routes := make([][]Point, len(g.chains))
	for d, chain := range g.chains {
		routes[d] = g.route(chain, pt)
	}
	used := make([]bool, len(g.chains))
	for k, e := range edges {
		d := g.edgeChain[k]
		ps := routes[d]
		if used[d] {
			// A repeated edge gets its own copy, so a caller may change one.
			ps = slices.Clone(ps)
		}
		used[d] = true
		res.Edges[k] = Route{Edge: e, Points: ps}
	}
	return res
}

// route is the polyline of a chain of items: out of the source's far side,
// along the middle of each virtual item's lane through its rank, and into
// the target's near side. Inside a rank it runs only along the rank axis, so
// it stays in its own lane; between ranks it runs straight.
func (g *graph) route(chain []int, pt func(along, across float64) Point) []Point {
	var ps []Point
	add := func(along, across float64) {
		p := pt(along, across)
		if len(ps) == 0 || ps[len(ps)-1] != p {
			ps = append(ps, p)
		}
	}
	for k, i := range chain {
		it := g.items[i]
		start, end := g.rankStart[it.rank], g.rankStart[it.rank]+g.rankSize[it.rank]
		centre := (start + end) / 2
		switch {
		case k == 0:
			add(centre+it.along/2, g.x[i])
			add(end, g.x[i])
		case k == len(chain)-1:
			add(start, g.x[i])
			add(centre-it.along/2, g.x[i])
		default:
			add(start, g.x[i])
			add(end, g.x[i])
		}
	}
	return ps
}
