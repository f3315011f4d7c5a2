package layout_test

import (
	"fmt"

	"github.com/dagflow/dagflow/internal/layout"
)

// The order workflow, left to right: reserve, then notify and points side by
// side, then ship. Each box is placed by its centre; each edge is a polyline
// from the source's border to the target's.
func ExampleLayout() {
	nodes := []layout.Node{
		{ID: "reserve", Width: 120, Height: 40},
		{ID: "notify", Width: 120, Height: 40},
		{ID: "points", Width: 120, Height: 40},
		{ID: "ship", Width: 120, Height: 40},
	}
	edges := []layout.Edge{
		{From: "reserve", To: "notify"}, {From: "reserve", To: "points"},
		{From: "notify", To: "ship"}, {From: "points", To: "ship"},
	}
	res, err := layout.Layout(nodes, edges, layout.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%vx%v, %d crossings\n", res.Width, res.Height, res.Crossings)
	for _, n := range res.Nodes {
		fmt.Printf("%-7s rank %d order %d at %v\n", n.ID, n.Rank, n.Order, n.Center)
	}
	for _, e := range res.Edges {
		fmt.Printf("%s -> %s: %v\n", e.From, e.To, e.Points)
	}
	// Output:
	// 480x104, 0 crossings
	// reserve rank 0 order 0 at {60 52}
	// notify  rank 1 order 0 at {240 20}
	// points  rank 1 order 1 at {240 84}
	// ship    rank 2 order 0 at {420 52}
	// reserve -> notify: [{120 52} {180 20}]
	// reserve -> points: [{120 52} {180 84}]
	// notify -> ship: [{300 20} {360 52}]
	// points -> ship: [{300 84} {360 52}]
}
