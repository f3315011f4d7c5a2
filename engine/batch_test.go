package engine

import (
	"testing"
	"time"
)

func TestLingerFor(t *testing.T) {
	const linger = 2 * time.Millisecond
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	for _, c := range []struct {
		name    string
		prevEnd time.Time
		cycle   time.Duration
		n       int
		want    time.Duration
	}{
		{"first transaction", time.Time{}, 0, 0, 0},
		{"second transaction: no cycle yet", now.Add(-ms(0.5)), 0, 3, 0},
		{"calls arriving one per 3 ms", now.Add(-ms(0.5)), ms(3), 1, 0},
		{"two per 2.2 ms: just too slow", now.Add(-ms(0.5)), ms(2.2), 2, 0},
		{"two per 2 ms: waits out the rest", now.Add(-ms(0.5)), ms(2), 2, ms(1.5)},
		{"four per 3 ms, previous just ended", now, ms(3), 4, ms(2)},
		{"fast, but the previous ended 1.8 ms ago", now.Add(-ms(1.8)), ms(3), 4, ms(0.2)},
		{"fast, but after a pause", now.Add(-50 * time.Millisecond), ms(3), 4, 0},
		{"a large batch of a busy loop", now.Add(-ms(0.1)), ms(12), 200, ms(1.9)},
	} {
		if got := lingerFor(now, c.prevEnd, c.cycle, c.n, linger); got != c.want {
			t.Errorf("%s: lingerFor = %v, want %v", c.name, got, c.want)
		}
	}
}
