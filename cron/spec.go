package cron

import (
	"errors"
	"fmt"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"

	"github.com/dagflow/dagflow/internal/clip"
)

// Errors a *SpecError wraps, for errors.Is.
var (
	// ErrInvalidSpec reports a cron spec that does not parse.
	ErrInvalidSpec = errors.New("cron: invalid spec")
	// ErrInvalidTimeZone reports a time zone that is not a known IANA name.
	ErrInvalidTimeZone = errors.New("cron: invalid time zone")
)

// SpecError reports a schedule whose spec or time zone is invalid. Its
// message names the schedule and the value:
//
//	cron: schedule "nightly": invalid spec "0 25 * * *": end of range (25) above maximum (23): 25
type SpecError struct {
	Schedule string
	Spec     string
	TimeZone string
	Kind     error // ErrInvalidSpec or ErrInvalidTimeZone
	Err      error // the cause
}

func (e *SpecError) Error() string {
	if e.Kind == ErrInvalidTimeZone {
		return fmt.Sprintf("cron: schedule %q: invalid time zone %q: %s", clip.String(e.Schedule), clip.String(e.TimeZone), clipCause(e.Err, e.TimeZone))
	}
	return fmt.Sprintf("cron: schedule %q: invalid spec %q: %s", clip.String(e.Schedule), clip.String(e.Spec), clipCause(e.Err, e.Spec))
}

// clipCause is the parser's message about value, with a long value
// quoted by its start and length where the message repeats it.
func clipCause(err error, value string) string {
	return clip.In(fmt.Sprint(err), value)
}

// Unwrap makes errors.Is(err, ErrInvalidSpec) (or ErrInvalidTimeZone) and
// errors.Is on the cause work.
func (e *SpecError) Unwrap() []error { return []error{e.Kind, e.Err} }

// parser accepts the standard five fields, an optional leading seconds
// field, and descriptors (@hourly, @daily, @every 10m, ...).
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour |
	robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// Spec is a parsed cron spec in a time zone: it computes a schedule's fire
// times. It is immutable and safe for concurrent use.
//
// Calendar specs ("0 2 * * *", "*/10 * * * * *", "@daily") are matched
// against the wall clock of the time zone, with this rule at daylight
// saving changes: a wall-clock time that does not exist (the hour skipped
// when clocks go forward) is skipped for that day, and a wall-clock time
// that occurs twice (the hour repeated when clocks go back) fires once, at
// its first occurrence.
//
// "@every <duration>" fires every duration of elapsed time, at multiples
// of the duration since the Unix epoch (so every node computes the same
// ticks, whenever it starts); the time zone does not matter to it. The
// duration is whole seconds, at least one.
type Spec struct {
	text  string
	tz    string
	loc   *time.Location
	every time.Duration        // for @every
	sched *robfig.SpecSchedule // for calendar specs
}

// Parse parses spec in the IANA time zone tz ("" means UTC). name is the
// schedule's name, used in error messages; errors are *SpecError.
func Parse(name, spec, tz string) (*Spec, error) {
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, &SpecError{Schedule: name, Spec: spec, TimeZone: tz, Kind: ErrInvalidTimeZone, Err: err}
		}
		if tz == "Local" {
			return nil, &SpecError{Schedule: name, Spec: spec, TimeZone: tz, Kind: ErrInvalidTimeZone,
				Err: errors.New("name an IANA zone; Local differs between nodes")}
		}
		loc = l
	}
	bad := func(err error) error {
		return &SpecError{Schedule: name, Spec: spec, TimeZone: tz, Kind: ErrInvalidSpec, Err: err}
	}
	text := strings.TrimSpace(spec)
	if text == "" {
		return nil, bad(errors.New("empty"))
	}
	if strings.HasPrefix(text, "TZ=") || strings.HasPrefix(text, "CRON_TZ=") {
		return nil, bad(errors.New("set the time zone on the schedule, not in the spec"))
	}
	s := &Spec{text: spec, tz: tz, loc: loc}
	if rest, ok := strings.CutPrefix(text, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, bad(err)
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, bad(fmt.Errorf("interval %v must be whole seconds, at least 1s", d))
		}
		s.every = d
		return s, nil
	}
	parsed, err := parser.Parse(text)
	if err != nil {
		return nil, bad(err)
	}
	ss, ok := parsed.(*robfig.SpecSchedule)
	if !ok {
		return nil, bad(fmt.Errorf("unsupported schedule type %T", parsed))
	}
	ss.Location = loc
	s.sched = ss
	return s, nil
}

// String returns the spec as written.
func (s *Spec) String() string { return s.text }

// Location returns the spec's time zone.
func (s *Spec) Location() *time.Location { return s.loc }

// Next returns the first fire time strictly after t, in the spec's time
// zone, or the zero time if there is none within five years.
func (s *Spec) Next(t time.Time) time.Time {
	if s.every > 0 {
		n := t.Unix()/int64(s.every/time.Second) + 1
		if t.Unix() < 0 && t.Unix()%int64(s.every/time.Second) != 0 {
			n-- // division truncates towards zero
		}
		return time.Unix(n*int64(s.every/time.Second), 0).In(s.loc)
	}
	for {
		n := s.sched.Next(t)
		if n.IsZero() {
			return n
		}
		n = n.In(s.loc)
		if !repeatedWallClock(n) {
			return n
		}
		t = n
	}
}

// repeatedWallClock reports whether t's wall-clock time in its zone was
// already shown earlier, because clocks went back less than an offset
// change ago: t is the second occurrence of that wall-clock time.
func repeatedWallClock(t time.Time) bool {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	_, after := t.Zone()
	back := time.Duration(before-after) * time.Second
	return back > 0 && t.Sub(start) < back
}

// Prev returns the last fire time at or before t, or the zero time if there
// is none within about five years before t.
func (s *Spec) Prev(t time.Time) time.Time {
	if s.every > 0 {
		sec := int64(s.every / time.Second)
		n := t.Unix() / sec
		if t.Unix() < 0 && t.Unix()%sec != 0 {
			n--
		}
		return time.Unix(n*sec, 0).In(s.loc)
	}
	// Look back over doubling spans until a fire time is found, then walk
	// forward to the last one at or before t.
	for back := time.Second; back < 6*366*24*time.Hour; back *= 2 {
		n := s.Next(t.Add(-back))
		if n.IsZero() || n.After(t) {
			continue
		}
		for {
			m := s.Next(n)
			if m.IsZero() || m.After(t) {
				return n
			}
			n = m
		}
	}
	return time.Time{}
}

// NextN returns the next n fire times strictly after t.
func (s *Spec) NextN(t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}
