package cron

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPlanTicks(t *testing.T) {
	perMinute, err := Parse("p", "* * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	min := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	type result struct {
		SkipFrom, SkipTo time.Time
		Skipped          int
		Fire             []time.Time
	}
	// Down from just after t0 to 10m30s: ten missed ticks, none on time.
	down := t0.Add(10*time.Minute + 30*time.Second)
	tests := []struct {
		name   string
		anchor time.Time
		now    time.Time
		policy CatchUp
		window time.Duration
		want   result
	}{
		{name: "on time", anchor: t0, now: min(1).Add(time.Second), policy: CatchUpNone,
			want: result{Fire: []time.Time{min(1)}}},
		{name: "nothing due", anchor: min(1), now: min(1).Add(59 * time.Second), policy: CatchUpAll},
		{name: "none drops missed", anchor: t0, now: down, policy: CatchUpNone,
			want: result{SkipFrom: min(1), SkipTo: min(10), Skipped: 10}},
		{name: "latest fires the last missed", anchor: t0, now: down, policy: CatchUpLatest,
			want: result{SkipFrom: min(1), SkipTo: min(9), Skipped: 9, Fire: []time.Time{min(10)}}},
		{name: "latest outside the window", anchor: t0, now: down, policy: CatchUpLatest, window: 20 * time.Second,
			want: result{SkipFrom: min(1), SkipTo: min(10), Skipped: 10}},
		{name: "latest with a tick on time", anchor: t0, now: min(10).Add(time.Second), policy: CatchUpLatest,
			want: result{SkipFrom: min(1), SkipTo: min(9), Skipped: 9, Fire: []time.Time{min(10)}}},
		{name: "all fires every missed", anchor: t0, now: down, policy: CatchUpAll,
			want: result{Fire: []time.Time{min(1), min(2), min(3), min(4), min(5), min(6), min(7), min(8), min(9), min(10)}}},
		{name: "all within the window", anchor: t0, now: down, policy: CatchUpAll, window: 3 * time.Minute,
			want: result{SkipFrom: min(1), SkipTo: min(7), Skipped: 7, Fire: []time.Time{min(8), min(9), min(10)}}},
		{name: "none keeps ticks within grace", anchor: t0, now: min(2).Add(5 * time.Second), policy: CatchUpNone,
			want: result{SkipFrom: min(1), SkipTo: min(1), Skipped: 1, Fire: []time.Time{min(2)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planTicks(perMinute, tt.anchor, tt.now, 10*time.Second, tt.policy, tt.window, 100)
			got := result{SkipFrom: p.skipFrom, SkipTo: p.skipTo, Skipped: p.skipped, Fire: p.fire}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanTicksBounded(t *testing.T) {
	everySecond, err := Parse("p", "@every 1s", "")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := planTicks(everySecond, t0, t0.Add(24*time.Hour), 10*time.Second, CatchUpAll, 0, 100)
	if len(p.fire) != 100 || !p.fire[0].Equal(t0.Add(time.Second)) {
		t.Errorf("got %d ticks from %v, want 100 from the first", len(p.fire), p.fire[0])
	}
	p = planTicks(everySecond, t0, t0.Add(24*time.Hour), 10*time.Second, CatchUpNone, 0, 100)
	if !p.skippedMore || p.skipped != maxCount || len(p.fire) != 11 {
		t.Errorf("got skipped %d (more %v), %d to fire; want %d+ and 11", p.skipped, p.skippedMore, len(p.fire), maxCount)
	}
}
