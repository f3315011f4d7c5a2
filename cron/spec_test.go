package cron_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/cron"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("zone %s: %v", name, err)
	}
	return loc
}

// fmtTimes formats times in the zone with the UTC offset, so that the two
// 01:30 of a fall-back night differ.
func fmtTimes(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Format("2006-01-02 15:04:05 -0700")
	}
	return out
}

func TestNextFireTimes(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	berlin := mustZone(t, "Europe/Berlin")
	tests := []struct {
		name  string
		spec  string
		tz    string
		after time.Time
		n     int
		want  []string
	}{
		{
			name: "daily in UTC", spec: "0 2 * * *",
			after: time.Date(2030, 1, 1, 3, 0, 0, 0, time.UTC), n: 2,
			want: []string{"2030-01-02 02:00:00 +0000", "2030-01-03 02:00:00 +0000"},
		},
		{
			// 2030-03-10: New York clocks jump from 02:00 to 03:00, so
			// 02:30 does not exist that day and is skipped once.
			name: "New York spring forward skips the missing time", spec: "30 2 * * *", tz: "America/New_York",
			after: time.Date(2030, 3, 9, 0, 0, 0, 0, ny), n: 3,
			want: []string{"2030-03-09 02:30:00 -0500", "2030-03-11 02:30:00 -0400", "2030-03-12 02:30:00 -0400"},
		},
		{
			// 2030-11-03: clocks go back from 02:00 EDT to 01:00 EST; 01:30
			// occurs twice and fires once, at the first (EDT) one.
			name: "New York fall back fires the repeated time once", spec: "30 1 * * *", tz: "America/New_York",
			after: time.Date(2030, 11, 2, 12, 0, 0, 0, ny), n: 3,
			want: []string{"2030-11-03 01:30:00 -0400", "2030-11-04 01:30:00 -0500", "2030-11-05 01:30:00 -0500"},
		},
		{
			name: "New York hourly across fall back", spec: "0 * * * *", tz: "America/New_York",
			after: time.Date(2030, 11, 3, 0, 30, 0, 0, ny), n: 3,
			want: []string{"2030-11-03 01:00:00 -0400", "2030-11-03 02:00:00 -0500", "2030-11-03 03:00:00 -0500"},
		},
		{
			name: "New York hourly across spring forward", spec: "@hourly", tz: "America/New_York",
			after: time.Date(2030, 3, 10, 0, 30, 0, 0, ny), n: 3,
			want: []string{"2030-03-10 01:00:00 -0500", "2030-03-10 03:00:00 -0400", "2030-03-10 04:00:00 -0400"},
		},
		{
			// 2030-03-31: Berlin clocks jump from 02:00 to 03:00.
			name: "Berlin spring forward skips the missing time", spec: "15 2 * * *", tz: "Europe/Berlin",
			after: time.Date(2030, 3, 30, 12, 0, 0, 0, berlin), n: 2,
			want: []string{"2030-04-01 02:15:00 +0200", "2030-04-02 02:15:00 +0200"},
		},
		{
			// 2030-10-27: Berlin clocks go back from 03:00 CEST to 02:00 CET.
			name: "Berlin fall back fires the repeated time once", spec: "15 2 * * *", tz: "Europe/Berlin",
			after: time.Date(2030, 10, 26, 12, 0, 0, 0, berlin), n: 3,
			want: []string{"2030-10-27 02:15:00 +0200", "2030-10-28 02:15:00 +0100", "2030-10-29 02:15:00 +0100"},
		},
		{
			name: "Berlin every 20 minutes through the repeated hour", spec: "*/20 * * * *", tz: "Europe/Berlin",
			after: time.Date(2030, 10, 27, 1, 50, 0, 0, berlin), n: 7,
			want: []string{
				"2030-10-27 02:00:00 +0200", "2030-10-27 02:20:00 +0200", "2030-10-27 02:40:00 +0200",
				// 02:00-02:59 CET repeats wall-clock times: no ticks.
				"2030-10-27 03:00:00 +0100", "2030-10-27 03:20:00 +0100", "2030-10-27 03:40:00 +0100",
				"2030-10-27 04:00:00 +0100",
			},
		},
		{
			name: "seconds field", spec: "*/15 * * * * *",
			after: time.Date(2030, 1, 1, 0, 0, 7, 500, time.UTC), n: 4,
			want: []string{"2030-01-01 00:00:15 +0000", "2030-01-01 00:00:30 +0000", "2030-01-01 00:00:45 +0000", "2030-01-01 00:01:00 +0000"},
		},
		{
			name: "seconds field with a fixed second", spec: "30 0 12 * * *",
			after: time.Date(2030, 1, 1, 12, 0, 30, 0, time.UTC), n: 1,
			want: []string{"2030-01-02 12:00:30 +0000"},
		},
		{
			name: "every 10m aligned to the epoch", spec: "@every 10m",
			after: time.Date(2030, 1, 1, 0, 3, 0, 0, time.UTC), n: 3,
			want: []string{"2030-01-01 00:10:00 +0000", "2030-01-01 00:20:00 +0000", "2030-01-01 00:30:00 +0000"},
		},
		{
			name: "every 1s from a tick", spec: "@every 1s",
			after: time.Date(2030, 1, 1, 0, 0, 5, 0, time.UTC), n: 2,
			want: []string{"2030-01-01 00:00:06 +0000", "2030-01-01 00:00:07 +0000"},
		},
		{
			name: "every 1h ignores DST", spec: "@every 1h", tz: "America/New_York",
			after: time.Date(2030, 11, 3, 0, 30, 0, 0, ny), n: 3,
			want: []string{"2030-11-03 01:00:00 -0400", "2030-11-03 01:00:00 -0500", "2030-11-03 02:00:00 -0500"},
		},
		{
			name: "weekdays by name", spec: "0 9 * * mon-fri",
			after: time.Date(2030, 1, 4, 10, 0, 0, 0, time.UTC), n: 2, // a Friday
			want: []string{"2030-01-07 09:00:00 +0000", "2030-01-08 09:00:00 +0000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := cron.Parse("test", tt.spec, tt.tz)
			if err != nil {
				t.Fatalf("Parse(%q, %q): %v", tt.spec, tt.tz, err)
			}
			got := fmtTimes(s.NextN(tt.after, tt.n))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NextN(%v) mismatch (-want +got):\n%s", tt.after, diff)
			}
			// Prev is Next's inverse: the last tick at or before each tick
			// is the tick itself, and before the first one it is not after
			// tt.after.
			for _, tick := range s.NextN(tt.after, tt.n) {
				if p := s.Prev(tick); !p.Equal(tick) {
					t.Errorf("Prev(%v) = %v, want the tick itself", tick, p)
				}
			}
			if p := s.Prev(s.Next(tt.after).Add(-time.Nanosecond)); p.After(tt.after) {
				t.Errorf("Prev before the first tick after %v is after it", tt.after)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		spec, tz string
		kind     error
		want     string // prefix of the message
	}{
		{spec: "0 25 * * *", kind: cron.ErrInvalidSpec, want: `cron: schedule "nightly": invalid spec "0 25 * * *": `},
		{spec: "* * *", kind: cron.ErrInvalidSpec, want: `cron: schedule "nightly": invalid spec "* * *": `},
		{spec: "", kind: cron.ErrInvalidSpec, want: `cron: schedule "nightly": invalid spec "": empty`},
		{spec: "@fortnightly", kind: cron.ErrInvalidSpec, want: `cron: schedule "nightly": invalid spec "@fortnightly": `},
		{spec: "@every 1.5s", kind: cron.ErrInvalidSpec, want: `cron: schedule "nightly": invalid spec "@every 1.5s": interval 1.5s must be whole seconds`},
		{spec: "@every 0s", kind: cron.ErrInvalidSpec, want: `cron: schedule "nightly": invalid spec "@every 0s": `},
		{spec: "@every soon", kind: cron.ErrInvalidSpec, want: `cron: schedule "nightly": invalid spec "@every soon": `},
		{spec: "CRON_TZ=UTC 0 2 * * *", kind: cron.ErrInvalidSpec, want: `cron: schedule "nightly": invalid spec "CRON_TZ=UTC 0 2 * * *": set the time zone on the schedule`},
		{spec: "0 0 0 0 0 0 0", kind: cron.ErrInvalidSpec, want: `cron: schedule "nightly": invalid spec "0 0 0 0 0 0 0": `},
		{spec: "0 2 * * *", tz: "Mars/Olympus_Mons", kind: cron.ErrInvalidTimeZone, want: `cron: schedule "nightly": invalid time zone "Mars/Olympus_Mons": `},
		{spec: "0 2 * * *", tz: "Local", kind: cron.ErrInvalidTimeZone, want: `cron: schedule "nightly": invalid time zone "Local": `},
	}
	for _, tt := range tests {
		t.Run(tt.spec+"/"+tt.tz, func(t *testing.T) {
			_, err := cron.Parse("nightly", tt.spec, tt.tz)
			if err == nil {
				t.Fatalf("Parse(%q, %q): no error", tt.spec, tt.tz)
			}
			var se *cron.SpecError
			if !errors.As(err, &se) || se.Schedule != "nightly" || se.Spec != tt.spec {
				t.Errorf("error %v: want a *SpecError naming the schedule and spec, got %#v", err, se)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %v: want errors.Is %v", err, tt.kind)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n got %q\nwant prefix %q", err.Error(), tt.want)
			}
		})
	}
}

func TestKey(t *testing.T) {
	got := cron.Key("nightly-settlement", time.Date(2030, 1, 1, 2, 0, 0, 0, time.UTC))
	if want := "schedule:nightly-settlement:1893463200"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}
