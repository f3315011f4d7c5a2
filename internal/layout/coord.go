package layout

import (
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
// settles between its neighbours), then absolute lengths (which make the
// edges that can be straight straight).
// coordWork bounds the passes by items and edges visited.
const (
	passesSquared  = 24
	passesAbsolute = 16
	coordWork      = 1 << 20
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
	for r, l := range g.layers {
		off[r] = g.offsets(l, o.NodeSep)
		if len(l) == 0 {
			continue
		}
		mid := off[r][len(l)-1] / 2
		for p, i := range l {
			g.x[i] = off[r][p] - mid
		}
	}
	// Huge graphs get fewer passes: every pass leaves a valid drawing, and
	// the later ones only polish it.
	size := len(g.items)
	for _, it := range g.items {
		size += len(it.down)
	}
	squared, absolute := passesSquared, passesAbsolute
	if size*(squared+absolute) > coordWork {
		squared = max(2, coordWork/size*3/5)
		absolute = max(2, coordWork/size*2/5)
	}
	var s solver
	for pass := range squared + absolute {
		if s.work > coordWork*8 {
			break // pooling huge ranks over and over: the drawing is good enough
		}
		absolute := pass >= squared
		if pass%2 == 0 {
			for r := range g.layers {
				g.place(r, off[r], absolute, &s)
			}
		} else {
			for r := len(g.layers) - 1; r >= 0; r-- {
				g.place(r, off[r], absolute, &s)
			}
		}
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
// and gaps. With y_p = x_p - off[p] the gaps become y_p <= y_{p+1}, so this
// is an isotonic regression, which pool-adjacent-violators solves exactly.
func (g *graph) place(r int, off []float64, absolute bool, s *solver) {
	l := g.layers[r]
	s.reset(absolute)
	for p, i := range l {
		s.push()
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
	for p, y := range s.solution(len(l)) {
		g.x[l[p]] = y + off[p]
	}
}

// target is a point an item wants to be at, with its weight.
type target struct{ at, w float64 }

// block is a run of items that share one y.
type block struct {
	n       int
	targets []target
	sumW    float64
	sumWAt  float64
	y       float64
}

// solver is the pool-adjacent-violators algorithm over items pushed in
// order, each with the targets it is drawn to.
type solver struct {
	absolute bool
	blocks   []block
	scratch  []target
	work     int // targets merged, see coordWork
}

func (s *solver) reset(absolute bool) {
	s.absolute = absolute
	s.blocks = s.blocks[:0]
}

func (s *solver) push() {
	if len(s.blocks) < cap(s.blocks) {
		s.blocks = s.blocks[:len(s.blocks)+1]
		b := &s.blocks[len(s.blocks)-1]
		b.n, b.targets, b.sumW, b.sumWAt = 1, b.targets[:0], 0, 0
		return
	}
	s.blocks = append(s.blocks, block{n: 1})
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
				return (t.at + b.targets[k+1].at) / 2
			}
			return t.at
		}
	}
	return b.targets[len(b.targets)-1].at
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
