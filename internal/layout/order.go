package layout

import (
	"slices"
	"sort"
)

// maxSweeps bounds the crossing reduction; sweeps stop earlier when
// stalled sweeps in a row bring no better ordering.
const (
	maxSweeps = 32
	stalled   = 6
)

// order reorders the ranks to cut crossings (unless optimise is false) and
// returns the number of crossings of the ordering it keeps.
func (g *graph) order(optimise bool) int {
	best := g.crossings()
	if !optimise || best == 0 {
		return best
	}
	bestLayers := g.snapshot()
	// Two heuristics from the same start; each keeps its best, the better
	// one wins. Barycenters settle dense ranks, medians resist outliers.
	start := g.snapshot()
	for _, useMedian := range []bool{false, true} {
		g.restore(start)
		c := g.sweep(useMedian)
		if c < best {
			best = c
			bestLayers = g.snapshot()
		}
		if best == 0 {
			break
		}
	}
	g.restore(bestLayers)
	return best
}

// sweep alternates down and up sweeps with transposition and leaves the best
// ordering it met in place.
func (g *graph) sweep(useMedian bool) int {
	best := g.crossings()
	bestLayers := g.snapshot()
	since := 0
	for s := 0; s < maxSweeps && best > 0 && since < stalled; s++ {
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
	type keyed struct {
		item int
		key  float64
	}
	var moving []keyed
	var slots []int
	flush := func() {
		sort.SliceStable(moving, func(a, b int) bool { return moving[a].key < moving[b].key })
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
	for improved, passes := true, 0; improved && passes < 32; passes++ {
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
