package layout

import (
	"math"
	"slices"
)

// maxSweeps bounds the crossing reduction; sweeps stop earlier when
// stalled sweeps in a row bring no better ordering, or when the graph's
// work (roughly, edge pairs compared) passes workBudget, which bounds what a
// dense graph, with thousands of virtual items per rank, can cost. The work
// is counted, not timed, so the same input still gives the same output.
const (
	maxSweeps  = 32
	stalled    = 6
	workBudget = 8 << 20
)

func (g *graph) busy() bool { return g.work > workBudget }

// order reorders the ranks to cut crossings (unless optimise is false) and
// returns the number of crossings of the ordering it keeps.
func (g *graph) order(optimise bool) int {
	best := g.crossings()
	if !optimise {
		return best
	}
	if best == 0 {
		g.balance()
		return 0
	}
	bestLayers := g.snapshot()
	// Sweeps only find a local optimum near where they start, so they start
	// from three orders: a smooth spectral one, the input's and a
	// depth-first walk's; and run with barycenters (which settle dense
	// ranks) and medians (which resist outliers). The best of all is kept.
	// A work budget stops the search early on huge or dense graphs, where
	// the best ordering found so far has to do.
	input := g.snapshot()
	starts := []func() [][]int{g.spectral, func() [][]int { return input }, g.depthFirst}
	for _, start := range starts {
		if g.busy() {
			break
		}
		layers := start()
		for _, useMedian := range []bool{false, true} {
			g.restore(layers)
			if c := g.sweep(useMedian); c < best {
				best, bestLayers = c, g.snapshot()
			}
			if best == 0 {
				g.restore(bestLayers)
				g.balance()
				return 0
			}
		}
	}
	g.restore(bestLayers)
	// Sifting moves single items further than sweeps and swaps do.
	g.sift()
	if c := g.crossings(); c < best {
		best = c
	} else {
		g.restore(bestLayers)
	}
	g.balance()
	return best
}

// balance makes the swaps of neighbours in a rank that change no crossing
// but bring items closer to the middle of their neighbours' ranks, heavier
// edges first (see weight): where several orders cross as little, the one
// that can be drawn straight and symmetric wins. A long edge from a fork
// runs through the middle of the fork's branches, not around the last one.
func (g *graph) balance() {
	// cost is the weighted squared distance from item i, were it at
	// position p, to its neighbours, each rank's positions centred on 0.
	centred := func(i, p int) float64 { return float64(p) - float64(len(g.layers[g.items[i].rank])-1)/2 }
	cost := func(i, p int) float64 {
		c := 0.0
		at := centred(i, p)
		for _, nb := range [][]int{g.items[i].up, g.items[i].down} {
			for _, v := range nb {
				d := at - centred(v, g.pos[v])
				c += g.weight(i, v) * d * d
			}
		}
		return c
	}
	for improved, passes := true, 0; improved && passes < 8 && !g.busy(); passes++ {
		improved = false
		for _, layer := range g.layers {
			g.work += len(layer)
			for p := 0; p+1 < len(layer); p++ {
				u, v := layer[p], layer[p+1]
				if g.items[u].comp != g.items[v].comp || g.pairCrossings(u, v) != g.pairCrossings(v, u) {
					continue
				}
				const tol = 1e-9
				if cost(u, p+1)+cost(v, p) < cost(u, p)+cost(v, p+1)-tol {
					layer[p], layer[p+1] = v, u
					g.pos[u], g.pos[v] = p+1, p
					improved = true
				}
			}
		}
	}
}

// depthFirst is the order in which a depth-first walk from the sources, in
// input order, meets the items (as dot starts).
func (g *graph) depthFirst() [][]int {
	layers := make([][]int, len(g.layers))
	seen := make([]bool, len(g.items))
	var stack []int
	for c := range g.ncomp {
		for _, l := range g.layers {
			for _, i := range l {
				if g.items[i].comp != c || seen[i] || len(g.items[i].up) > 0 {
					continue
				}
				stack = append(stack[:0], i)
				for len(stack) > 0 {
					u := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					if seen[u] {
						continue
					}
					seen[u] = true
					layers[g.items[u].rank] = append(layers[g.items[u].rank], u)
					down := g.items[u].down
					for k := len(down) - 1; k >= 0; k-- {
						if !seen[down[k]] {
							stack = append(stack, down[k])
						}
					}
				}
			}
		}
	}
	return layers
}

// spectral orders each rank by a smooth coordinate: starting from the input
// positions, every item repeatedly moves halfway to the mean of its
// neighbours on both sides, and each component's band in each rank is
// re-centred and re-scaled after each round. That is power iteration towards the smoothest non-trivial
// mode of the graph within the ranks, which sees the whole graph at once
// where a sweep sees two ranks.
func (g *graph) spectral() [][]int {
	x := make([]float64, len(g.items))
	for _, l := range g.layers {
		for p, i := range l {
			x[i] = float64(p) - float64(len(l)-1)/2
		}
	}
	next := make([]float64, len(x))
	size := len(g.items)
	for _, it := range g.items {
		size += len(it.down)
	}
	rounds := min(spectralRounds, max(8, spectralWork/size))
	g.work += rounds * size
	for range rounds {
		for i, it := range g.items {
			n := len(it.up) + len(it.down)
			if n == 0 {
				next[i] = x[i]
				continue
			}
			sum := 0.0
			for _, v := range it.up {
				sum += x[v]
			}
			for _, v := range it.down {
				sum += x[v]
			}
			next[i] = (x[i] + sum/float64(n)) / 2
		}
		x, next = next, x
		g.eachBand(func(band []int) { normalise(x, band) })
		moved := 0.0
		for i := range x {
			moved = max(moved, math.Abs(x[i]-next[i]))
		}
		if moved < 1e-9 {
			break
		}
	}
	saved := g.snapshot()
	g.eachBand(func(band []int) {
		slices.SortStableFunc(band, func(a, b int) int { return cmpFloat(x[a], x[b]) })
	})
	layers := g.snapshot()
	g.restore(saved)
	return layers
}

// eachBand calls f with each component's run of items in each rank.
func (g *graph) eachBand(f func(band []int)) {
	for _, l := range g.layers {
		for lo := 0; lo < len(l); {
			hi := lo + 1
			for hi < len(l) && g.items[l[hi]].comp == g.items[l[lo]].comp {
				hi++
			}
			f(l[lo:hi])
			lo = hi
		}
	}
}

// spectralRounds bounds the power iteration, which usually settles sooner;
// on large graphs spectralWork bounds it (in items and edges visited).
const (
	spectralRounds = 1024
	spectralWork   = 4 << 20
)

// normalise centres a band's coordinates on 0 with a spread of 1, so that
// no band shrinks to a point under the averaging.
func normalise(x []float64, l []int) {
	if len(l) == 0 {
		return
	}
	mean := 0.0
	for _, i := range l {
		mean += x[i]
	}
	mean /= float64(len(l))
	sq := 0.0
	for _, i := range l {
		x[i] -= mean
		sq += x[i] * x[i]
	}
	if sq == 0 {
		return
	}
	scale := 1 / math.Sqrt(sq/float64(len(l)))
	for _, i := range l {
		x[i] *= scale
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sweep alternates down and up sweeps with transposition and leaves the best
// ordering it met in place.
func (g *graph) sweep(useMedian bool) int {
	best := g.crossings()
	bestLayers := g.snapshot()
	since := 0
	for s := 0; s < maxSweeps && best > 0 && since < stalled && !g.busy(); s++ {
		down := s%2 == 0
		if down {
			for r := 1; r < len(g.layers); r++ {
				g.sortLayer(r, true, useMedian)
			}
		} else {
			for r := len(g.layers) - 2; r >= 0; r-- {
				g.sortLayer(r, false, useMedian)
			}
		}
		g.transpose()
		if c := g.crossings(); c < best {
			best, bestLayers, since = c, g.snapshot(), 0
		} else {
			since++
		}
	}
	g.restore(bestLayers)
	return best
}

func (g *graph) snapshot() [][]int {
	s := make([][]int, len(g.layers))
	for r, l := range g.layers {
		s[r] = slices.Clone(l)
	}
	return s
}

func (g *graph) restore(s [][]int) {
	for r, l := range s {
		copy(g.layers[r], l)
	}
	g.reindex()
}

// sortLayer sorts rank r by the positions of each item's neighbours in the
// rank before (byUp) or after. Items without such neighbours keep their
// place; items only move within their component's band.
func (g *graph) sortLayer(r int, byUp, useMedian bool) {
	layer := g.layers[r]
	g.work += len(layer)
	type keyed struct {
		item int
		key  float64
	}
	var moving []keyed
	var slots []int
	flush := func() {
		slices.SortStableFunc(moving, func(a, b keyed) int { return cmpFloat(a.key, b.key) })
		for k, s := range slots {
			layer[s] = moving[k].item
		}
		moving, slots = moving[:0], slots[:0]
	}
	var buf []int
	for p, it := range layer {
		if p > 0 && g.items[it].comp != g.items[layer[p-1]].comp {
			flush()
		}
		nb := g.items[it].down
		if byUp {
			nb = g.items[it].up
		}
		if len(nb) == 0 {
			continue
		}
		buf = buf[:0]
		for _, v := range nb {
			buf = append(buf, g.pos[v])
		}
		moving = append(moving, keyed{it, key(buf, useMedian)})
		slots = append(slots, p)
	}
	flush()
	for p, it := range layer {
		g.pos[it] = p
	}
}

// key is the barycenter of the positions, or their weighted median
// (Gansner et al.), which leans to the side where the neighbours are packed
// closer when there is an even number of them.
func key(ps []int, useMedian bool) float64 {
	if !useMedian {
		sum := 0
		for _, p := range ps {
			sum += p
		}
		return float64(sum) / float64(len(ps))
	}
	slices.Sort(ps)
	m := len(ps) / 2
	switch {
	case len(ps)%2 == 1:
		return float64(ps[m])
	case len(ps) == 2:
		return float64(ps[0]+ps[1]) / 2
	}
	left := float64(ps[m-1] - ps[0])
	right := float64(ps[len(ps)-1] - ps[m])
	if left+right == 0 {
		return float64(ps[m-1]+ps[m]) / 2
	}
	return (float64(ps[m-1])*right + float64(ps[m])*left) / (left + right)
}

// transpose swaps neighbours in a rank while that cuts the crossings with
// the ranks on both sides.
func (g *graph) transpose() {
	for improved, passes := true, 0; improved && passes < 32 && !g.busy(); passes++ {
		improved = false
		for _, layer := range g.layers {
			for p := 0; p+1 < len(layer); p++ {
				u, v := layer[p], layer[p+1]
				if g.items[u].comp != g.items[v].comp {
					continue
				}
				if g.pairCrossings(v, u) < g.pairCrossings(u, v) {
					layer[p], layer[p+1] = v, u
					g.pos[u], g.pos[v] = p+1, p
					improved = true
				}
			}
		}
	}
}

// pairCrossings counts the crossings between the edges of u and of v, u
// placed just before v, on both sides of their rank.
func (g *graph) pairCrossings(u, v int) int {
	g.work += 1 + len(g.items[u].up)*len(g.items[v].up) + len(g.items[u].down)*len(g.items[v].down)
	return g.sideCrossings(g.items[u].up, g.items[v].up) + g.sideCrossings(g.items[u].down, g.items[v].down)
}

func (g *graph) sideCrossings(a, b []int) int {
	c := 0
	for _, x := range a {
		for _, y := range b {
			if g.pos[x] > g.pos[y] {
				c++
			}
		}
	}
	return c
}

// crossings counts the crossings of the current ordering exactly: rank by
// rank, edges sorted by their upper end, every inversion among their lower
// ends is a crossing (Barth, Jünger and Mutzel's bilayer count, with a
// Fenwick tree).
func (g *graph) crossings() int {
	g.work += len(g.items)
	total := 0
	var ends []int
	var tree []int
	for r := 0; r+1 < len(g.layers); r++ {
		ends = ends[:0]
		for _, u := range g.layers[r] {
			start := len(ends)
			for _, v := range g.items[u].down {
				ends = append(ends, g.pos[v])
			}
			slices.Sort(ends[start:])
		}
		m := len(g.layers[r+1])
		tree = slices.Grow(tree[:0], m+1)[:m+1]
		clear(tree)
		g.work += len(ends)
		for k, p := range ends {
			// Edges seen so far ending after p: k minus those ending at or
			// before p.
			le := 0
			for i := p + 1; i > 0; i -= i & -i {
				le += tree[i]
			}
			total += k - le
			for i := p + 1; i <= m; i += i & -i {
				tree[i]++
			}
		}
	}
	return total
}

// sift moves each item, one at a time, to the place in its rank (within its
// component's band) where it crosses the fewest edges of the others, while
// that helps (Matuszewski et al.'s sifting, one rank at a time).
func (g *graph) sift() {
	var band []int
	for improved, passes := true, 0; improved && passes < 8 && !g.busy(); passes++ {
		improved = false
		for _, layer := range g.layers {
			for lo := 0; lo < len(layer) && !g.busy(); {
				hi := lo + 1
				for hi < len(layer) && g.items[layer[hi]].comp == g.items[layer[lo]].comp {
					hi++
				}
				band = append(band[:0], layer[lo:hi]...)
				for _, u := range band {
					if g.siftItem(layer[lo:hi], u, lo) {
						improved = true
					}
				}
				lo = hi
			}
		}
	}
}

// siftItem moves u to its best place in band (which starts at layer
// position lo) and reports whether that cut crossings.
func (g *graph) siftItem(band []int, u, lo int) bool {
	// Walk u from the front of the band to the back: passing v changes the
	// crossings by pairCrossings(v, u) - pairCrossings(u, v).
	cost, best, bestAt, cur := 0, 0, 0, 0
	at := 0
	for _, v := range band {
		if v == u {
			cur = cost
			continue
		}
		cost += g.pairCrossings(v, u) - g.pairCrossings(u, v)
		at++
		if cost < best {
			best, bestAt = cost, at
		}
	}
	if best >= cur {
		return false
	}
	from := g.pos[u] - lo
	copy(band[from:], band[from+1:])
	copy(band[bestAt+1:], band[bestAt:len(band)-1])
	band[bestAt] = u
	for p, v := range band {
		g.pos[v] = lo + p
	}
	return true
}
