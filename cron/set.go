package cron

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// The scheduler keeps the stored schedules in memory (the set) and the
// next time each must be looked at in a heap, so that a pass costs the
// schedules that are due, not all of them: a node with 10,000 tenant
// schedules reads the one index range of the changes and pops the few
// due entries. The store stays the truth: every pass reads the
// schedules changed since the last one (Store.ScheduleListChanged, a
// range of an index on the change time), and a due schedule is read by
// its key before it fires, so its cursor is the one every node shares.

// changeLookback is how far before the newest change a node already read
// it reads again: a change committed late (a slow transaction) or stamped
// by a node whose clock is a little behind is still seen. Rows read again
// unchanged cost a comparison.
const changeLookback = 10 * time.Second

// changePage is how many changed schedules one read returns.
const changePage = 1000

// entry is one schedule as this node knows it.
type entry struct {
	sc    persistence.Schedule
	spec  *Spec     // nil when this node does not fire it
	due   time.Time // when the next pass must look at it
	fresh bool      // sc was read in this pass: no need to read it again
	index int       // in the heap, or -1
	every bool      // buffer_one: looked at every pass (its buffered tick waits on a run's end)
}

type dueHeap []*entry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

// set is the schedules this node knows, read from the store.
type set struct {
	loaded    bool
	entries   map[string]*entry
	heap      dueHeap
	changedAt time.Time // the newest change read
}

// refresh brings the set up to date with the store: the whole list the
// first time, then the changes since the last read.
func (s *Scheduler) refresh(ctx context.Context, now time.Time) error {
	st := &s.set
	if !st.loaded {
		list, err := s.cfg.Store.ScheduleList(ctx)
		if err != nil {
			return fmt.Errorf("cron: list schedules: %w", err)
		}
		st.entries = make(map[string]*entry, len(list))
		st.heap = st.heap[:0]
		for _, sc := range list {
			s.apply(sc, now)
		}
		st.loaded = true
		return nil
	}
	after, name := st.changedAt, ""
	// A set that has seen no change (the store was empty) reads from the
	// lookback too: a zero After would mean "from now" to the store.
	if since := now.Add(-changeLookback); after.IsZero() || since.Before(after) {
		after = since
	}
	for {
		page, err := s.cfg.Store.ScheduleListChanged(ctx, persistence.ScheduleListChangedParams{After: after, AfterName: name, Limit: changePage})
		if err != nil {
			return fmt.Errorf("cron: read changed schedules: %w", err)
		}
		for _, sc := range page {
			if e := st.entries[sc.Name]; e != nil && e.sc.ChangedAt.Equal(sc.ChangedAt) {
				continue
			}
			if e := st.entries[sc.Name]; e == nil && sc.Deleted {
				continue
			}
			s.apply(sc, now)
		}
		if len(page) < changePage {
			return nil
		}
		last := page[len(page)-1]
		after, name = last.ChangedAt, last.Name
	}
}

// apply puts a schedule read from the store into the set (or takes a
// deleted one out), due when its next tick after its cursor comes.
func (s *Scheduler) apply(sc persistence.Schedule, now time.Time) {
	st := &s.set
	if sc.ChangedAt.After(st.changedAt) {
		st.changedAt = sc.ChangedAt
	}
	e := st.entries[sc.Name]
	if sc.Deleted {
		if e != nil {
			if e.index >= 0 {
				heap.Remove(&st.heap, e.index)
			}
			delete(st.entries, sc.Name)
		}
		return
	}
	if e == nil {
		e = &entry{index: -1}
		st.entries[sc.Name] = e
	}
	e.sc, e.fresh, e.spec = sc, true, nil
	if s.cfg.Starter.CanStart(sc.Workflow) {
		if sp, err := s.spec(sc); err == nil {
			e.spec = sp
		}
	}
	if e.spec == nil {
		if e.index >= 0 {
			heap.Remove(&st.heap, e.index)
		}
		return
	}
	e.every = Overlap(sc.Overlap) == OverlapBufferOne
	s.schedule(e, now)
}

// schedule sets an entry's due time from its cursor: the next tick after
// it (a tick at or before now is due at once).
func (s *Scheduler) schedule(e *entry, now time.Time) {
	anchor := e.sc.CreatedAt
	if e.sc.LastTick != nil {
		anchor = *e.sc.LastTick
	}
	due := e.spec.Next(anchor)
	switch {
	case e.every:
		due = now
	case due.IsZero(): // a spec with no more ticks
		due = now.Add(24 * time.Hour)
	}
	s.setDue(e, due)
}

func (s *Scheduler) setDue(e *entry, due time.Time) {
	e.due = due
	if e.index >= 0 {
		heap.Fix(&s.set.heap, e.index)
		return
	}
	heap.Push(&s.set.heap, e)
}

// popDue takes the entries due at now out of the heap, earliest first.
func (s *Scheduler) popDue(now time.Time) []*entry {
	var out []*entry
	h := &s.set.heap
	for h.Len() > 0 && !(*h)[0].due.After(now) {
		out = append(out, heap.Pop(h).(*entry))
	}
	return out
}
