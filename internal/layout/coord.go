package layout

import (
	"math"
	"slices"
)

// Weights of an edge segment in the coordinate objective, by the kinds of
// its ends (Gansner et al.'s Ω): straight long edges matter most, since a
// bent long edge wanders across the drawing.
const (
	weightRealReal = 1
	weightRealVirt = 2
	weightVirtVirt = 8
	// weightAnchor holds an item with no neighbours where it is.
	weightAnchor = 1e-3
)

// Passes of the coordinate assignment: squared lengths first (each item
// settles between its neighbours) until no item moves by more than settled
// px (a hundredth of a pixel: what is left the absolute phase snaps), then absolute lengths (which make the edges that can be straight
// straight) until none moves. coordWork bounds both by the items, edges
// and pooled targets visited: every pass leaves a valid drawing, and on a
// huge graph the later ones only polish it.
const (
	maxPassesSquared  = 400
	maxPassesAbsolute = 100
	settled           = 1e-2
	coordWork         = 1 << 20
)

// coordinates places the ranks along the rank axis and the items across it.
func (g *graph) coordinates(o Options) {
	g.rankStart = make([]float64, len(g.layers))
	g.rankSize = make([]float64, len(g.layers))
	at := 0.0
	for r, l := range g.layers {
		for _, i := range l {
			g.rankSize[r] = max(g.rankSize[r], g.items[i].along)
		}
		g.rankStart[r] = at
		at += g.rankSize[r] + o.RankSep
	}

	// Start packed, each rank centred on 0.
	g.x = make([]float64, len(g.items))
	off := make([][]float64, len(g.layers))
	nodeSep := o.NodeSep
	for r, l := range g.layers {
		off[r] = g.offsets(l, nodeSep)
		if len(l) == 0 {
			continue
		}
		mid := off[r][len(l)-1] / 2
		for p, i := range l {
			g.x[i] = off[r][p] - mid
		}
	}
	size := len(g.items)
	for _, it := range g.items {
		size += len(it.down)
	}
	var s solver
	for _, phase := range []struct {
		absolute  bool
		maxPasses int
		settled   float64
	}{{false, maxPassesSquared, settled}, {true, maxPassesAbsolute, 0}} {
		for pass := 0; pass < phase.maxPasses; pass++ {
			moved := 0.0
			if pass%2 == 0 {
				for r := range g.layers {
					moved = max(moved, g.place(r, off[r], phase.absolute, &s))
				}
			} else {
				for r := len(g.layers) - 1; r >= 0; r-- {
					moved = max(moved, g.place(r, off[r], phase.absolute, &s))
				}
			}
			s.work += size
			if moved <= phase.settled || s.work > coordWork {
				break
			}
		}
	}
	g.straighten(nodeSep)
}

// straighten puts each path of items linked one to one (a chain of steps,
// or a long edge's lane) on one line where its ranks have room for it, at
// no more cost in weighted absolute edge length than it had. Absolute
// lengths do not care where along a path the bends are, and left to
// themselves leave a staircase; a person sees a straight run and a bend
// where the path branches.
func (g *graph) straighten(nodeSep float64) {
	for _, path := range g.paths() {
		g.straightenPath(path, nodeSep)
	}
}

// paths returns the maximal runs of two or more items in which each item
// has exactly one neighbour down and the next has exactly one up, longest
// first (ties in rank order).
func (g *graph) paths() [][]int {
	var paths [][]int
	oneToOne := func(u int) bool {
		d := g.items[u].down
		return len(d) == 1 && len(g.items[d[0]].up) == 1
	}
	for _, l := range g.layers {
		for _, u := range l {
			up := g.items[u].up
			if len(up) == 1 && oneToOne(up[0]) {
				continue // not the head of its run
			}
			if !oneToOne(u) {
				continue
			}
			path := []int{u}
			for oneToOne(u) {
				u = g.items[u].down[0]
				path = append(path, u)
			}
			paths = append(paths, path)
		}
	}
	slices.SortStableFunc(paths, func(a, b []int) int { return len(b) - len(a) })
	return paths
}

func (g *graph) straightenPath(path []int, nodeSep float64) {
	head, tail := path[0], path[len(path)-1]
	// cost is the weighted length of the path's edges with it at y, and
	// now its length as it is.
	cost := func(y float64) float64 {
		c := 0.0
		for _, v := range g.items[head].up {
			c += g.weight(head, v) * math.Abs(y-g.x[v])
		}
		for _, v := range g.items[tail].down {
			c += g.weight(tail, v) * math.Abs(y-g.x[v])
		}
		return c
	}
	now := 0.0
	for _, v := range g.items[head].up {
		now += g.weight(head, v) * math.Abs(g.x[head]-g.x[v])
	}
	for k := 1; k < len(path); k++ {
		now += g.weight(path[k-1], path[k]) * math.Abs(g.x[path[k]]-g.x[path[k-1]])
	}
	for _, v := range g.items[tail].down {
		now += g.weight(tail, v) * math.Abs(g.x[tail]-g.x[v])
	}
	// Every y where the path fits between its neighbours in all its ranks.
	lo, hi := math.Inf(-1), math.Inf(1)
	for _, i := range path {
		l := g.layers[g.items[i].rank]
		p := g.pos[i]
		if p > 0 {
			v := l[p-1]
			lo = max(lo, g.x[v]+g.items[v].across/2+nodeSep+g.items[i].across/2)
		}
		if p+1 < len(l) {
			v := l[p+1]
			hi = min(hi, g.x[v]-g.items[v].across/2-nodeSep-g.items[i].across/2)
		}
	}
	// The cost is piecewise linear in y, so its least is at a neighbour's
	// y or at the end of the room; the path's own ys are as good a place
	// as any.
	var candidates []float64
	for _, v := range g.items[head].up {
		candidates = append(candidates, g.x[v])
	}
	for _, v := range g.items[tail].down {
		candidates = append(candidates, g.x[v])
	}
	for _, i := range path {
		candidates = append(candidates, g.x[i])
	}
	candidates = append(candidates, lo, hi)
	best, bestCost := math.NaN(), math.Inf(1)
	const tol = 1e-9
	for _, y := range candidates {
		if y < lo-tol || y > hi+tol || math.IsInf(y, 0) {
			continue
		}
		if c := cost(y); c < bestCost-tol {
			best, bestCost = y, c
		}
	}
	if math.IsNaN(best) || bestCost > now+tol*(1+now) {
		return
	}
	for _, i := range path {
		g.x[i] = best
	}
}

// offsets returns each item's least distance from the first item's centre
// when the rank is packed tight.
func (g *graph) offsets(l []int, nodeSep float64) []float64 {
	off := make([]float64, len(l))
	for p := 1; p < len(l); p++ {
		off[p] = off[p-1] + g.items[l[p-1]].across/2 + nodeSep + g.items[l[p]].across/2
	}
	return off
}

func (g *graph) weight(u, v int) float64 {
	switch ru, rv := g.items[u].real >= 0, g.items[v].real >= 0; {
	case ru && rv:
		return weightRealReal
	case ru || rv:
		return weightRealVirt
	}
	return weightVirtVirt
}

// place moves rank r's items to minimise the weighted lengths (squared or
// absolute) of their edges to both neighbouring ranks, keeping their order
// and gaps, and returns how far the furthest item moved. With y_p = x_p - off[p] the gaps become y_p <= y_{p+1}, so this
// is an isotonic regression, which pool-adjacent-violators solves exactly.
func (g *graph) place(r int, off []float64, absolute bool, s *solver) float64 {
	l := g.layers[r]
	s.reset(absolute)
	for p, i := range l {
		s.push(g.x[i] - off[p])
		n := 0
		for _, nb := range [][]int{g.items[i].up, g.items[i].down} {
			for _, v := range nb {
				s.add(g.x[v]-off[p], g.weight(i, v))
				n++
			}
		}
		if n == 0 {
			s.add(g.x[i]-off[p], weightAnchor)
		}
		s.merge()
	}
	moved := 0.0
	for p, y := range s.solution(len(l)) {
		moved = max(moved, math.Abs(g.x[l[p]]-(y+off[p])))
		g.x[l[p]] = y + off[p]
	}
	return moved
}

// target is a point an item wants to be at, with its weight.
type target struct{ at, w float64 }

// block is a run of items that share one y.
type block struct {
	n       int
	targets []target
	sumW    float64
	sumWAt  float64
	sumNow  float64 // of the items' current y
	y       float64
}

// solver is the pool-adjacent-violators algorithm over items pushed in
// order, each with the targets it is drawn to.
type solver struct {
	absolute bool
	blocks   []block
	scratch  []target
	work     int // items, edges and targets visited, see coordWork
}

func (s *solver) reset(absolute bool) {
	s.absolute = absolute
	s.blocks = s.blocks[:0]
}

func (s *solver) push(now float64) {
	if len(s.blocks) < cap(s.blocks) {
		s.blocks = s.blocks[:len(s.blocks)+1]
		b := &s.blocks[len(s.blocks)-1]
		b.n, b.targets, b.sumW, b.sumWAt, b.sumNow = 1, b.targets[:0], 0, 0, now
		return
	}
	s.blocks = append(s.blocks, block{n: 1, sumNow: now})
}

func (s *solver) add(at, w float64) {
	b := &s.blocks[len(s.blocks)-1]
	b.targets = append(b.targets, target{at, w})
	b.sumW += w
	b.sumWAt += w * at
}

// merge fits the last block and pools it with the ones before while they
// would sit after it.
func (s *solver) merge() {
	last := &s.blocks[len(s.blocks)-1]
	if s.absolute {
		slices.SortFunc(last.targets, func(p, q target) int { return cmpFloat(p.at, q.at) })
	}
	last.y = s.fit(last)
	for len(s.blocks) > 1 {
		a, b := &s.blocks[len(s.blocks)-2], &s.blocks[len(s.blocks)-1]
		if a.y <= b.y {
			return
		}
		a.n += b.n
		if s.absolute {
			// Both lists are sorted; merging keeps them so in linear time.
			s.scratch = mergeTargets(s.scratch[:0], a.targets, b.targets)
			s.work += len(s.scratch)
			a.targets, s.scratch = s.scratch, a.targets
		} else {
			a.targets = append(a.targets, b.targets...)
		}
		a.sumW += b.sumW
		a.sumWAt += b.sumWAt
		a.sumNow += b.sumNow
		a.y = s.fit(a)
		s.blocks = s.blocks[:len(s.blocks)-1]
	}
}

// mergeTargets appends the merge of sorted a and b to dst.
func mergeTargets(dst, a, b []target) []target {
	for len(a) > 0 && len(b) > 0 {
		if b[0].at < a[0].at {
			dst, b = append(dst, b[0]), b[1:]
		} else {
			dst, a = append(dst, a[0]), a[1:]
		}
	}
	return append(append(dst, a...), b...)
}

// fit is the best y for a block: the weighted mean of its targets for
// squared lengths, their weighted median (of the targets, kept sorted) for
// absolute ones (the middle of
// the median interval when there is one, so a node between two neighbours
// sits between them).
func (s *solver) fit(b *block) float64 {
	if !s.absolute {
		return b.sumWAt / b.sumW
	}
	half := b.sumW / 2
	cum := 0.0
	const eps = 1e-9
	for k, t := range b.targets {
		cum += t.w
		if cum >= half-eps*b.sumW {
			if cum <= half+eps*b.sumW && k+1 < len(b.targets) {
				return inInterval(t.at, b.targets[k+1].at, b.sumNow/float64(b.n))
			}
			return t.at
		}
	}
	return b.targets[len(b.targets)-1].at
}

// inInterval picks a y in [lo, hi], where every y is as good: the end
// nearer to where the items are now, so that an edge that is straight
// stays straight and one that nearly is becomes so; the middle if they are
// as near to both, so that a node between two symmetric neighbours stays
// between them.
func inInterval(lo, hi, now float64) float64 {
	const tie = 1e-6
	switch dlo, dhi := math.Abs(now-lo), math.Abs(now-hi); {
	case math.Abs(dlo-dhi) <= tie*(1+dlo+dhi):
		return (lo + hi) / 2
	case dlo < dhi:
		return lo
	}
	return hi
}

func (s *solver) solution(n int) []float64 {
	ys := make([]float64, 0, n)
	for _, b := range s.blocks {
		for range b.n {
			ys = append(ys, b.y)
		}
	}
	return ys
}
