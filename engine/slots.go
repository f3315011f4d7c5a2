package engine

import "context"

// slotPool bounds how many steps this node runs at once (Config.
// Concurrency). A step holds one slot from its claim until its goroutine
// ends; a slot is handed over when a completion's batch claims a released
// step into it (committer.go). Every acquire, take, hand-over and release
// goes through these methods.
type slotPool struct {
	ch chan struct{}
}

func newSlotPool(n int) *slotPool { return &slotPool{ch: make(chan struct{}, n)} }

// acquire takes one slot, waiting for it; false when ctx ended first.
func (p *slotPool) acquire(ctx context.Context) bool {
	select {
	case p.ch <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// tryTake takes up to n free slots without waiting and returns how many
// it took.
func (p *slotPool) tryTake(n int) int {
	got := 0
	for got < n {
		select {
		case p.ch <- struct{}{}:
			got++
		default:
			return got
		}
	}
	return got
}

// free gives n slots back. Freeing none is a no-op, also on the nil pool
// of a node without workers.
func (p *slotPool) free(n int) {
	if n <= 0 {
		return
	}
	for range n {
		<-p.ch
	}
}

// release gives one slot back.
func (p *slotPool) release() { <-p.ch }

// idle is how many slots are free now.
func (p *slotPool) idle() int { return cap(p.ch) - len(p.ch) }
