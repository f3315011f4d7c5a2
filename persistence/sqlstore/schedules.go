package sqlstore

import (
	"context"
	"fmt"

	"github.com/dagflow/dagflow/persistence"
)

func (s *Store) validSchedule(sc *persistence.Schedule) error {
	if err := validName("schedule name", sc.Name); err != nil {
		return err
	}
	if err := validName("workflow name", sc.Workflow); err != nil {
		return err
	}
	if err := validToken("cron spec", sc.Spec, MaxSpecLen); err != nil {
		return err
	}
	if sc.TimeZone != "" {
		if err := validToken("time zone", sc.TimeZone, MaxSpecLen); err != nil {
			return err
		}
	}
	if sc.Overlap == "" {
		sc.Overlap = persistence.OverlapAllow
	}
	switch sc.Overlap {
	case persistence.OverlapAllow, persistence.OverlapSkip, persistence.OverlapBufferOne:
	default:
		return invalid("overlap policy", sc.Overlap, "must be allow, skip or buffer_one")
	}
	if sc.CatchUp == "" {
		sc.CatchUp = persistence.CatchUpNone
	}
	switch sc.CatchUp {
	case persistence.CatchUpNone, persistence.CatchUpLatest, persistence.CatchUpAll:
	default:
		return invalid("catch-up policy", sc.CatchUp, "must be none, latest or all")
	}
	if sc.CatchUpWindow < 0 {
		return invalid("catch-up window", sc.CatchUpWindow.String(), "negative")
	}
	return s.validJSON(fmt.Sprintf("schedule %q input", sc.Name), sc.Input)
}

// ScheduleUpsert implements persistence.Store. The timestamps of a new
// schedule are the current time (Schedule has no Now field).
func (s *Store) ScheduleUpsert(ctx context.Context, sc persistence.Schedule) (persistence.Schedule, error) {
	if err := s.validSchedule(&sc); err != nil {
		return persistence.Schedule{}, err
	}
	now := norm(sc.UpdatedAt)
	created := now
	if !sc.CreatedAt.IsZero() {
		created = norm(sc.CreatedAt)
	}
	var out persistence.Schedule
	err := s.write(ctx, func(q querier) error {
		if _, err := s.exec(ctx, q, `INSERT INTO schedules (name, spec, time_zone, workflow, input, overlap_policy,
			catch_up, catch_up_window_us, paused, disabled, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`+
			s.d.Upsert([]string{"name"}, []string{"spec", "time_zone", "workflow", "input", "overlap_policy",
				"catch_up", "catch_up_window_us", "disabled", "updated_at"}),
			sc.Name, sc.Spec, sc.TimeZone, sc.Workflow, nullBytes(sc.Input), sc.Overlap, sc.CatchUp,
			sc.CatchUpWindow.Microseconds(), sc.Paused, false, s.t(created), s.t(now)); err != nil {
			return err
		}
		var err error
		out, err = s.scheduleGet(ctx, q, sc.Name)
		return err
	})
	return out, wrap("schedule upsert", err)
}

// ScheduleGet implements persistence.Store.
func (s *Store) ScheduleGet(ctx context.Context, name string) (persistence.Schedule, error) {
	if err := scheduleRef(name); err != nil {
		return persistence.Schedule{}, err
	}
	sc, err := s.scheduleGet(ctx, s.db, name)
	return sc, wrap("schedule get", err)
}

func (s *Store) scheduleGet(ctx context.Context, q querier, name string) (persistence.Schedule, error) {
	var rows []scheduleRow
	if err := s.selectAll(ctx, q, &rows, `SELECT `+scheduleCols+` FROM schedules WHERE name = ?`, name); err != nil {
		return persistence.Schedule{}, err
	}
	if len(rows) == 0 {
		return persistence.Schedule{}, fmt.Errorf("%w: %q", persistence.ErrScheduleNotFound, name)
	}
	return rows[0].record(), nil
}

// ScheduleList implements persistence.Store.
func (s *Store) ScheduleList(ctx context.Context) ([]persistence.Schedule, error) {
	var rows []scheduleRow
	if err := s.selectAll(ctx, s.db, &rows, `SELECT `+scheduleCols+` FROM schedules ORDER BY name`); err != nil {
		return nil, wrap("schedule list", err)
	}
	out := make([]persistence.Schedule, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// ScheduleUpdate implements persistence.Store.
func (s *Store) ScheduleUpdate(ctx context.Context, p persistence.ScheduleUpdateParams) (persistence.Schedule, error) {
	if err := scheduleRef(p.Name); err != nil {
		return persistence.Schedule{}, err
	}
	now := norm(p.Now)
	var out persistence.Schedule
	err := s.write(ctx, func(q querier) error {
		set, args := "updated_at = ?", []any{s.t(now)}
		if p.Paused != nil {
			set += ", paused = ?"
			args = append(args, *p.Paused)
		}
		if p.Disabled != nil {
			set += ", disabled = ?"
			args = append(args, *p.Disabled)
		}
		n, err := s.exec(ctx, q, `UPDATE schedules SET `+set+` WHERE name = ?`, append(args, p.Name)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: %q", persistence.ErrScheduleNotFound, p.Name)
		}
		out, err = s.scheduleGet(ctx, q, p.Name)
		return err
	})
	return out, wrap("schedule update", err)
}

// ScheduleAdvance implements persistence.Store with one conditional
// UPDATE.
func (s *Store) ScheduleAdvance(ctx context.Context, p persistence.ScheduleAdvanceParams) (bool, error) {
	if err := scheduleRef(p.Name); err != nil {
		return false, err
	}
	now, to := norm(p.Now), norm(p.To)
	query := `UPDATE schedules SET last_tick = ?, updated_at = ? WHERE name = ? AND last_tick IS NULL`
	args := []any{s.t(to), s.t(now), p.Name}
	if p.From != nil {
		query = `UPDATE schedules SET last_tick = ?, updated_at = ? WHERE name = ? AND last_tick = ?`
		args = append(args, s.t(norm(*p.From)))
	}
	n, err := s.exec1(ctx, query, args...)
	if err != nil {
		return false, wrap("schedule advance", err)
	}
	if n > 0 {
		return true, nil
	}
	ok, err := s.exists(ctx, s.db, `SELECT 1 FROM schedules WHERE name = ?`, p.Name)
	if err != nil {
		return false, wrap("schedule advance", err)
	}
	if !ok {
		return false, fmt.Errorf("%w: %q", persistence.ErrScheduleNotFound, p.Name)
	}
	return false, nil
}

// ScheduleTickRecord implements persistence.Store.
func (s *Store) ScheduleTickRecord(ctx context.Context, t persistence.ScheduleTick) error {
	if err := validName("schedule name", t.Schedule); err != nil {
		return err
	}
	switch t.Outcome {
	case persistence.TickFired, persistence.TickSkipped, persistence.TickBuffered:
	default:
		return invalid("tick outcome", t.Outcome, "must be fired, skipped or buffered")
	}
	if t.RunID != "" {
		if err := validRunID(t.RunID); err != nil {
			return err
		}
	}
	created := norm(t.CreatedAt)
	_, err := s.exec1(ctx, `INSERT INTO schedule_ticks (`+tickCols+`) VALUES (?, ?, ?, ?, ?, ?)`+
		s.d.InsertIgnore([]string{"schedule", "tick"}),
		t.Schedule, s.t(norm(t.Tick)), t.Outcome, t.RunID, nullString(cleanText(t.Reason)), s.t(created))
	return wrap("schedule tick record", err)
}

// ScheduleTickList implements persistence.Store.
func (s *Store) ScheduleTickList(ctx context.Context, p persistence.ScheduleTickListParams) ([]persistence.ScheduleTick, error) {
	if scheduleRef(p.Name) != nil {
		return nil, nil
	}
	var rows []tickRow
	if err := s.selectAll(ctx, s.db, &rows, `SELECT `+tickCols+` FROM schedule_ticks WHERE schedule = ?
		ORDER BY tick DESC LIMIT ?`, p.Name, clampLimit(p.Limit, 100, 1000)); err != nil {
		return nil, wrap("schedule tick list", err)
	}
	out := make([]persistence.ScheduleTick, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}
