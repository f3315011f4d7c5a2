// Package layout places a workflow's DAG for drawing: it turns nodes (boxes
// with a size) and directed edges into box centres and edge polylines, so
// that the dashboard can render the graph as SVG on the server without a
// JavaScript layout library.
//
// [Layout] is a layered (Sugiyama style) layout in four stages:
//
//  1. Ranks: every node goes to the rank of the longest path that reaches
//     it from a source, and a source moves next to its nearest successor so
//     that it does not dangle far away. Ranks are columns left to right, or
//     rows top to bottom with [Options.TopToBottom].
//  2. Long edges: an edge spanning several ranks is split by a virtual node
//     in every rank it crosses, so it bends around the boxes in between.
//  3. Order: repeated down and up sweeps sort each rank by the barycenter or
//     the median of its neighbours in the rank before, and adjacent nodes
//     are swapped while that removes crossings. The ordering with the fewest
//     crossings, counted exactly rank pair by rank pair, is kept and
//     reported in [Result.Crossings]. Disconnected components keep to their
//     own bands and never interleave.
//  4. Coordinates: within each rank the positions minimise the total length
//     of the edges across the ranks (first squared, which balances a node
//     between its neighbours, then absolute, which pulls edges straight),
//     subject to the nodes keeping their order and at least
//     [Options.NodeSep] apart. Each rank is solved exactly by pool-adjacent-
//     violators regression, so boxes never overlap. Last, every run of
//     one-to-one links (a chain of steps, a long edge's lane) is put on one
//     line where its ranks have room, so its bends gather where it branches.
//
// Edges leave their source from the middle of its far side (right, or bottom)
// and enter their target in the middle of its near side (left, or top). A
// route runs straight through the gaps between ranks and only horizontally
// (vertically) inside a rank, along a lane kept free for it, so it crosses
// no box. The drawing starts at (0, 0); callers add their own margin.
//
// The package uses the standard library only and does no I/O. The same input
// always gives the same output.
package layout
