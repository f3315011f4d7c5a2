package layout

import (
	"fmt"
	"math/rand/v2"
)

// grid generates a workflow-shaped DAG of layers x width steps. Each step
// sits in a hidden lane; it depends on one to three steps of lanes near its
// own (so a drawing with few crossings exists, as in real workflows where
// parallel branches run side by side), mostly in the layer before and now
// and then two to four layers back (long edges). Steps in the first layer
// have no dependencies. The nodes are listed layer by layer but shuffled
// within each layer, so the input order itself says nothing about lanes.
// Box sizes vary like step names do.
func grid(layers, width int, seed uint64) ([]Node, []Edge) {
	r := rand.New(rand.NewPCG(seed, 24))
	id := func(l, lane int) string { return fmt.Sprintf("s%02d_%02d", l, lane) }
	var nodes []Node
	var edges []Edge
	for l := range layers {
		lanes := r.Perm(width)
		for _, lane := range lanes {
			nodes = append(nodes, Node{ID: id(l, lane), Width: float64(60 + 10*r.IntN(8)), Height: float64(28 + 4*r.IntN(3))})
		}
		if l == 0 {
			continue
		}
		for _, lane := range lanes {
			deps := map[string]bool{}
			for k := range 1 + r.IntN(3) {
				back := 1
				if k > 0 && l >= 2 && r.IntN(5) == 0 {
					back = 2 + r.IntN(min(3, l-1))
				}
				from := min(max(lane+r.IntN(3)-1, 0), width-1)
				dep := id(l-back, from)
				if !deps[dep] {
					deps[dep] = true
					edges = append(edges, Edge{dep, id(l, lane)})
				}
			}
		}
	}
	return nodes, edges
}

// laneCrossings counts the crossings of the drawing grid had in mind: each
// step at (layer, lane), each edge a straight line. It is a witness that a
// drawing with that many crossings exists (a long edge running along other
// lines counts as no crossing, which only makes it stricter).
func laneCrossings(edges []Edge) int {
	at := func(id string) Point {
		var l, lane int
		if _, err := fmt.Sscanf(id, "s%02d_%02d", &l, &lane); err != nil {
			panic(err)
		}
		return Point{float64(l), float64(lane)}
	}
	ends := make([][2]Point, len(edges))
	for k, e := range edges {
		ends[k] = [2]Point{at(e.From), at(e.To)}
	}
	c := 0
	for i := range ends {
		for j := i + 1; j < len(ends); j++ {
			if properCross(ends[i][0], ends[i][1], ends[j][0], ends[j][1]) {
				c++
			}
		}
	}
	return c
}
