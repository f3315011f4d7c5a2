package dashboard

import (
	"fmt"
	"sort"
)

// A small layered layout used until the shared one is wired in: ranks by
// longest path, order within a rank by the barycenter of the
// predecessors, left to right.

type layoutNode struct {
	ID            string
	Width, Height float64
}

type layoutEdge struct{ From, To string }

type layoutPoint struct{ X, Y float64 }

type layoutPlaced struct {
	layoutNode
	X, Y float64 // centre
}

type layoutRoute struct {
	layoutEdge
	Points []layoutPoint
}

type layoutResult struct {
	Nodes         []layoutPlaced
	Edges         []layoutRoute
	Width, Height float64
}

func placeGraph(nodes []layoutNode, edges []layoutEdge) (layoutResult, error) {
	const rankSep, nodeSep = 60.0, 24.0
	idx := map[string]int{}
	for i, n := range nodes {
		if _, dup := idx[n.ID]; dup {
			return layoutResult{}, fmt.Errorf("dashboard: layout: duplicate node %q", n.ID)
		}
		idx[n.ID] = i
	}
	preds := make([][]int, len(nodes))
	for _, e := range edges {
		f, ok1 := idx[e.From]
		t, ok2 := idx[e.To]
		if !ok1 || !ok2 {
			return layoutResult{}, fmt.Errorf("dashboard: layout: edge %s -> %s names an unknown node", e.From, e.To)
		}
		preds[t] = append(preds[t], f)
	}
	rank := make([]int, len(nodes))
	state := make([]int, len(nodes))
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return fmt.Errorf("dashboard: layout: a cycle through %q", nodes[i].ID)
		case 2:
			return nil
		}
		state[i] = 1
		for _, p := range preds[i] {
			if err := visit(p); err != nil {
				return err
			}
			rank[i] = max(rank[i], rank[p]+1)
		}
		state[i] = 2
		return nil
	}
	maxRank := 0
	for i := range nodes {
		if err := visit(i); err != nil {
			return layoutResult{}, err
		}
		maxRank = max(maxRank, rank[i])
	}
	layers := make([][]int, maxRank+1)
	for i := range nodes {
		layers[rank[i]] = append(layers[rank[i]], i)
	}
	pos := make([]float64, len(nodes))
	for r, l := range layers {
		if r > 0 {
			sort.SliceStable(l, func(a, b int) bool { return bary(preds[l[a]], pos) < bary(preds[l[b]], pos) })
		}
		for o, i := range l {
			pos[i] = float64(o)
		}
	}
	maxW, maxH, widest := 0.0, 0.0, 0
	for _, n := range nodes {
		maxW, maxH = max(maxW, n.Width), max(maxH, n.Height)
	}
	for _, l := range layers {
		widest = max(widest, len(l))
	}
	height := float64(widest)*(maxH+nodeSep) - nodeSep
	res := layoutResult{Nodes: make([]layoutPlaced, len(nodes)), Width: float64(maxRank+1)*(maxW+rankSep) - rankSep, Height: max(height, 0)}
	for _, l := range layers {
		off := (height - (float64(len(l))*(maxH+nodeSep) - nodeSep)) / 2
		for o, i := range l {
			res.Nodes[i] = layoutPlaced{layoutNode: nodes[i], X: float64(rank[i])*(maxW+rankSep) + maxW/2, Y: off + float64(o)*(maxH+nodeSep) + maxH/2}
		}
	}
	for _, e := range edges {
		f, t := res.Nodes[idx[e.From]], res.Nodes[idx[e.To]]
		res.Edges = append(res.Edges, layoutRoute{layoutEdge: e, Points: []layoutPoint{{f.X + f.Width/2, f.Y}, {t.X - t.Width/2, t.Y}}})
	}
	return res, nil
}

func bary(ps []int, pos []float64) float64 {
	if len(ps) == 0 {
		return 0
	}
	s := 0.0
	for _, p := range ps {
		s += pos[p]
	}
	return s / float64(len(ps))
}
