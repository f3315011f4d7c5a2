package layout

import (
	"fmt"
	"slices"
	"strings"
)

// item is a node of the layered graph: a real node (real >= 0, the index in
// the input) or a virtual node that carries a long edge through a rank.
type item struct {
	rank int
	real int
	// along is the box size along the rank axis (width left to right),
	// across the size across it, in the direction of the order.
	along, across float64
	comp          int
	up, down      []int // neighbours in the rank before and after
}

// graph is the layered graph: items (the real nodes first, at their input
// index, then the virtual ones), the ranks in their current order, and for
// each distinct edge the chain of items it runs through.
type graph struct {
	items  []item
	layers [][]int
	pos    []int // pos[i] is item i's index in its layer
	x      []float64
	// chains[k] runs from the source to the target of distinct edge k;
	// edgeChain maps each input edge to its distinct edge.
	chains    [][]int
	edgeChain []int
	rankStart []float64 // where each rank begins on the rank axis
	rankSize  []float64
	ncomp     int
	work      int // spent by the crossing reduction, see workBudget
}

// build checks the input, ranks the nodes and splits long edges.
func build(nodes []Node, edges []Edge, o Options) (*graph, error) {
	n := len(nodes)
	index := make(map[string]int, n)
	g := &graph{items: make([]item, n)}
	for i, nd := range nodes {
		if j, dup := index[nd.ID]; dup {
			return nil, fmt.Errorf("%w %q (nodes %d and %d)", ErrDuplicateID, nd.ID, j, i)
		}
		index[nd.ID] = i
		if !validSize(nd.Width) {
			return nil, fmt.Errorf("%w: node %q: width %v is not a finite size in [0, %g]", ErrBadSize, nd.ID, nd.Width, float64(MaxSize))
		}
		if !validSize(nd.Height) {
			return nil, fmt.Errorf("%w: node %q: height %v is not a finite size in [0, %g]", ErrBadSize, nd.ID, nd.Height, float64(MaxSize))
		}
		it := item{real: i, along: nd.Width, across: nd.Height}
		if o.TopToBottom {
			it.along, it.across = nd.Height, nd.Width
		}
		g.items[i] = it
	}

	// Distinct edges, in the order they first appear.
	type pair struct{ from, to int }
	distinct := map[pair]int{}
	var from, to []int
	g.edgeChain = make([]int, len(edges))
	for k, e := range edges {
		u, ok := index[e.From]
		if !ok {
			return nil, fmt.Errorf("%w %q in edge %q -> %q", ErrUnknownNode, e.From, e.From, e.To)
		}
		v, ok := index[e.To]
		if !ok {
			return nil, fmt.Errorf("%w %q in edge %q -> %q", ErrUnknownNode, e.To, e.From, e.To)
		}
		if u == v {
			return nil, fmt.Errorf("%w through node %q: %s -> %s", ErrCycle, e.From, e.From, e.To)
		}
		p := pair{u, v}
		d, seen := distinct[p]
		if !seen {
			d = len(from)
			distinct[p] = d
			from, to = append(from, u), append(to, v)
		}
		g.edgeChain[k] = d
	}

	rank, err := ranks(nodes, from, to)
	if err != nil {
		return nil, err
	}
	g.components(from, to)

	maxRank := -1
	for i := range n {
		g.items[i].rank = rank[i]
		maxRank = max(maxRank, rank[i])
	}
	g.chains = make([][]int, len(from))
	for d := range from {
		u, v := from[d], to[d]
		chain := []int{u}
		prev := u
		for r := rank[u] + 1; r < rank[v]; r++ {
			w := len(g.items)
			g.items = append(g.items, item{rank: r, real: -1, comp: g.items[u].comp})
			g.link(prev, w)
			chain = append(chain, w)
			prev = w
		}
		g.link(prev, v)
		g.chains[d] = append(chain, v)
	}

	// Ranks in input order, components grouped (each keeps its band).
	g.layers = make([][]int, maxRank+1)
	for c := range g.ncomp {
		for i := range g.items {
			if g.items[i].comp == c {
				r := g.items[i].rank
				g.layers[r] = append(g.layers[r], i)
			}
		}
	}
	g.pos = make([]int, len(g.items))
	g.reindex()
	return g, nil
}

func (g *graph) link(u, v int) {
	g.items[u].down = append(g.items[u].down, v)
	g.items[v].up = append(g.items[v].up, u)
}

func (g *graph) reindex() {
	for _, l := range g.layers {
		for p, i := range l {
			g.pos[i] = p
		}
	}
}

// ranks gives every node the length of the longest path from a source to
// it, then moves each source to just before its nearest successor. It fails
// on a cycle, naming one.
func ranks(nodes []Node, from, to []int) ([]int, error) {
	n := len(nodes)
	succ := make([][]int, n)
	pred := make([][]int, n)
	indeg := make([]int, n)
	for d := range from {
		succ[from[d]] = append(succ[from[d]], to[d])
		pred[to[d]] = append(pred[to[d]], from[d])
		indeg[to[d]]++
	}
	rank := make([]int, n)
	queue := make([]int, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for h := 0; h < len(queue); h++ {
		u := queue[h]
		for _, v := range succ[u] {
			rank[v] = max(rank[v], rank[u]+1)
			if indeg[v]--; indeg[v] == 0 {
				queue = append(queue, v)
			}
		}
	}
	if len(queue) < n {
		return nil, cycleError(nodes, pred, indeg)
	}
	for _, u := range queue {
		if len(pred[u]) == 0 && len(succ[u]) > 0 {
			nearest := rank[succ[u][0]]
			for _, v := range succ[u][1:] {
				nearest = min(nearest, rank[v])
			}
			rank[u] = nearest - 1
		}
	}
	return rank, nil
}

// cycleError names a cycle among the nodes Kahn's algorithm left over:
// every one of them has a left-over predecessor, so walking back from one
// must come round to a node already seen.
func cycleError(nodes []Node, pred [][]int, indeg []int) error {
	start := 0
	for indeg[start] == 0 {
		start++
	}
	seen := map[int]int{}
	var walk []int
	for v := start; ; {
		if at, ok := seen[v]; ok {
			walk = walk[at:]
			break
		}
		seen[v] = len(walk)
		walk = append(walk, v)
		for _, u := range pred[v] {
			if indeg[u] > 0 {
				v = u
				break
			}
		}
	}
	// walk goes against the edges; name the cycle along them, from the
	// node on it that comes first in the input.
	slices.Reverse(walk)
	first := 0
	for k, v := range walk {
		if v < walk[first] {
			first = k
		}
	}
	ids := make([]string, 0, len(walk)+1)
	for k := range walk {
		ids = append(ids, nodes[walk[(first+k)%len(walk)]].ID)
	}
	ids = append(ids, ids[0])
	return fmt.Errorf("%w through node %q: %s", ErrCycle, ids[0], strings.Join(ids, " -> "))
}

// components numbers the weakly connected components in the order of their
// first node.
func (g *graph) components(from, to []int) {
	n := len(g.items)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for d := range from {
		a, b := find(from[d]), find(to[d])
		if a != b {
			parent[max(a, b)] = min(a, b)
		}
	}
	id := map[int]int{}
	for i := range n {
		r := find(i)
		c, ok := id[r]
		if !ok {
			c = len(id)
			id[r] = c
		}
		g.items[i].comp = c
	}
	g.ncomp = len(id)
}
