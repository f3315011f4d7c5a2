package cron

import (
	"time"
)

// plan is what one pass does with a schedule's due ticks: drop the missed
// ticks skipFrom..skipTo (skipped of them), then handle fire in order.
type plan struct {
	skipFrom, skipTo time.Time
	skipped          int
	skippedMore      bool // skipped is a lower bound
	fire             []time.Time
}

// maxCount bounds the counting of missed ticks for the history message.
const maxCount = 10000

// planTicks splits the ticks after anchor and at or before now into missed
// ticks to drop and ticks to handle, by the catch-up policy. A tick is
// missed when it is more than grace before now.
func planTicks(spec *Spec, anchor, now time.Time, grace time.Duration, policy CatchUp, window time.Duration, max int) plan {
	var p plan
	first := spec.Next(anchor)
	if first.IsZero() || first.After(now) {
		return p
	}
	cutoff := now.Add(-grace)
	// firstAtOrAfter is the first tick at or after t (and after anchor).
	firstAtOrAfter := func(t time.Time) time.Time {
		if !t.After(anchor) {
			return first
		}
		return spec.Next(t.Add(-time.Nanosecond))
	}
	inWindow := func(t time.Time) bool { return window <= 0 || !t.Before(now.Add(-window)) }
	var from time.Time // first tick to handle; ticks before it are missed
	switch {
	case !first.Before(cutoff):
		from = first
	case policy == CatchUpAll:
		from = first
		if window > 0 {
			from = firstAtOrAfter(now.Add(-window))
		}
	case policy == CatchUpLatest:
		from = firstAtOrAfter(cutoff)
		if from.IsZero() || from.After(now) {
			if last := spec.Prev(cutoff.Add(-time.Nanosecond)); !last.IsZero() && last.After(anchor) && inWindow(last) {
				from = last
			}
		}
	default:
		from = firstAtOrAfter(cutoff)
	}
	if from.IsZero() || from.After(now) {
		p.skipTo = spec.Prev(now)
	} else if from.After(first) {
		p.skipTo = spec.Prev(from.Add(-time.Nanosecond))
	}
	if !p.skipTo.IsZero() {
		p.skipFrom = first
		for t := first; !t.IsZero() && !t.After(p.skipTo); t = spec.Next(t) {
			if p.skipped == maxCount {
				p.skippedMore = true
				break
			}
			p.skipped++
		}
	}
	for t := from; !t.IsZero() && !t.After(now) && len(p.fire) < max; t = spec.Next(t) {
		p.fire = append(p.fire, t)
	}
	return p
}
