package sqlstore

import (
	"context"
	"fmt"
	"time"

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
// schedule are the current time (Schedule has no Now field). A row an
// operator owns is not updated: the UPDATE matches code-owned rows only,
// and the INSERT of a name that exists does nothing.
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
		n, err := s.exec(ctx, q, `UPDATE schedules SET spec = ?, time_zone = ?, workflow = ?, input = ?, overlap_policy = ?,
			catch_up = ?, catch_up_window_us = ?, disabled = ?, updated_at = ?, changed_at = ?
			WHERE name = ? AND owner = ?`,
			sc.Spec, sc.TimeZone, sc.Workflow, nullBytes(sc.Input), sc.Overlap, sc.CatchUp,
			sc.CatchUpWindow.Microseconds(), false, s.t(now), s.t(now), sc.Name, persistence.OwnerCode)
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := s.exec(ctx, q, `INSERT INTO schedules (name, spec, time_zone, workflow, input, overlap_policy,
				catch_up, catch_up_window_us, paused, disabled, created_at, updated_at, owner, deleted, changed_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`+s.d.InsertIgnore([]string{"name"}),
				sc.Name, sc.Spec, sc.TimeZone, sc.Workflow, nullBytes(sc.Input), sc.Overlap, sc.CatchUp,
				sc.CatchUpWindow.Microseconds(), sc.Paused, false, s.t(created), s.t(now),
				persistence.OwnerCode, false, s.t(now)); err != nil {
				return err
			}
		}
		out, err = s.scheduleGet(ctx, q, sc.Name, true)
		return err
	})
	return out, wrap("schedule upsert", err)
}

// ScheduleCreate implements persistence.Store. The schedule's times are
// sc.UpdatedAt.
func (s *Store) ScheduleCreate(ctx context.Context, sc persistence.Schedule) (persistence.Schedule, error) {
	if err := s.validSchedule(&sc); err != nil {
		return persistence.Schedule{}, err
	}
	now := s.t(norm(sc.UpdatedAt))
	var out persistence.Schedule
	err := s.write(ctx, func(q querier) error {
		var rows []struct {
			Deleted bool `db:"deleted"`
		}
		if err := s.selectAll(ctx, q, &rows, `SELECT deleted FROM schedules WHERE name = ?`+s.d.ForUpdate, sc.Name); err != nil {
			return err
		}
		exists := fmt.Errorf("%w: %q", persistence.ErrScheduleExists, sc.Name)
		switch {
		case len(rows) > 0 && !rows[0].Deleted:
			return exists
		case len(rows) > 0:
			// A deleted schedule's tombstone becomes the new schedule;
			// its history stays.
			if _, err := s.exec(ctx, q, `UPDATE schedules SET spec = ?, time_zone = ?, workflow = ?, input = ?,
				overlap_policy = ?, catch_up = ?, catch_up_window_us = ?, paused = ?, disabled = ?, last_tick = NULL,
				created_at = ?, updated_at = ?, owner = ?, deleted = ?, changed_at = ? WHERE name = ? AND deleted = ?`,
				sc.Spec, sc.TimeZone, sc.Workflow, nullBytes(sc.Input), sc.Overlap, sc.CatchUp,
				sc.CatchUpWindow.Microseconds(), sc.Paused, false, now, now, persistence.OwnerOperator, false, now,
				sc.Name, true); err != nil {
				return err
			}
		default:
			if _, err := s.exec(ctx, q, `INSERT INTO schedules (name, spec, time_zone, workflow, input, overlap_policy,
				catch_up, catch_up_window_us, paused, disabled, created_at, updated_at, owner, deleted, changed_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				sc.Name, sc.Spec, sc.TimeZone, sc.Workflow, nullBytes(sc.Input), sc.Overlap, sc.CatchUp,
				sc.CatchUpWindow.Microseconds(), sc.Paused, false, now, now, persistence.OwnerOperator, false, now); err != nil {
				if s.d.IsDuplicate(err) {
					return exists
				}
				return err
			}
		}
		var err error
		out, err = s.scheduleGet(ctx, q, sc.Name, false)
		return err
	})
	return out, wrap("schedule create", err)
}

// ScheduleEdit implements persistence.Store.
func (s *Store) ScheduleEdit(ctx context.Context, p persistence.ScheduleEditParams) (persistence.Schedule, error) {
	sc := p.Schedule
	if err := s.validSchedule(&sc); err != nil {
		return persistence.Schedule{}, err
	}
	now := s.t(norm(p.Now))
	set := `spec = ?, time_zone = ?, workflow = ?, input = ?, overlap_policy = ?, catch_up = ?, catch_up_window_us = ?,
		owner = ?, updated_at = ?, changed_at = ?`
	args := []any{sc.Spec, sc.TimeZone, sc.Workflow, nullBytes(sc.Input), sc.Overlap, sc.CatchUp,
		sc.CatchUpWindow.Microseconds(), persistence.OwnerOperator, now, now}
	if p.ResetCursor {
		set += ", last_tick = ?"
		args = append(args, now)
	}
	var out persistence.Schedule
	err := s.write(ctx, func(q querier) error {
		n, err := s.exec(ctx, q, `UPDATE schedules SET `+set+` WHERE name = ? AND deleted = ?`, append(args, sc.Name, false)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: %q", persistence.ErrScheduleNotFound, sc.Name)
		}
		out, err = s.scheduleGet(ctx, q, sc.Name, false)
		return err
	})
	return out, wrap("schedule edit", err)
}

// ScheduleDelete implements persistence.Store.
func (s *Store) ScheduleDelete(ctx context.Context, p persistence.ScheduleDeleteParams) error {
	if err := scheduleRef(p.Name); err != nil {
		return err
	}
	now := s.t(norm(p.Now))
	n, err := s.exec1(ctx, `UPDATE schedules SET deleted = ?, owner = ?, updated_at = ?, changed_at = ? WHERE name = ? AND deleted = ?`,
		true, persistence.OwnerOperator, now, now, p.Name, false)
	if err != nil {
		return wrap("schedule delete", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", persistence.ErrScheduleNotFound, p.Name)
	}
	return nil
}

// ScheduleListChanged implements persistence.Store: one range of
// idx_schedules_changed (changed_at, name), from a keyset cursor.
func (s *Store) ScheduleListChanged(ctx context.Context, p persistence.ScheduleListChangedParams) ([]persistence.Schedule, error) {
	q := s.scheduleChangedQuery(p)
	var rows []scheduleRow
	if err := s.selectAll(ctx, s.db, &rows, q.SQL, q.Args...); err != nil {
		return nil, wrap("schedule list changed", err)
	}
	out := make([]persistence.Schedule, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

func (s *Store) scheduleChangedQuery(p persistence.ScheduleListChangedParams) Query {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultChangeLimit
	}
	limit = min(limit, maxChangeLimit)
	after := s.t(norm(p.After))
	from := `SELECT ` + scheduleCols + ` FROM schedules` + s.d.useIndex("idx_schedules_changed")
	if p.AfterName == "" {
		// The usual read: one range from a time on.
		return Query{Name: "ScheduleListChanged", SQL: from + ` WHERE changed_at > ? ORDER BY changed_at, name LIMIT ?`,
			Args: []any{after, limit}}
	}
	// The next page of a read: it reads the index entries of the page's
	// last time again (a bulk change may give many rows one time).
	return Query{Name: "ScheduleListChanged/page", SQL: from +
		` WHERE changed_at >= ? AND (changed_at > ? OR (changed_at = ? AND name > ?)) ORDER BY changed_at, name LIMIT ?`,
		Args: []any{after, after, after, p.AfterName, limit}}
}

// ScheduleQueries are the schedule queries that must read an index, for
// the EXPLAIN tests.
func (s *Store) ScheduleQueries(after time.Time) []Query {
	return []Query{
		s.scheduleChangedQuery(persistence.ScheduleListChangedParams{After: after}),
		s.scheduleChangedQuery(persistence.ScheduleListChangedParams{After: after, AfterName: "tenant-00001"}),
		{Name: "ScheduleGet", SQL: `SELECT ` + scheduleCols + ` FROM schedules WHERE name = ?`, Args: []any{"tenant-00001"}},
	}
}

// ScheduleGet implements persistence.Store.
func (s *Store) ScheduleGet(ctx context.Context, name string) (persistence.Schedule, error) {
	if err := scheduleRef(name); err != nil {
		return persistence.Schedule{}, err
	}
	sc, err := s.scheduleGet(ctx, s.db, name, false)
	return sc, wrap("schedule get", err)
}

// scheduleGet reads a live schedule, or with deleted also a tombstone.
func (s *Store) scheduleGet(ctx context.Context, q querier, name string, deleted bool) (persistence.Schedule, error) {
	var rows []scheduleRow
	if err := s.selectAll(ctx, q, &rows, `SELECT `+scheduleCols+` FROM schedules WHERE name = ?`, name); err != nil {
		return persistence.Schedule{}, err
	}
	if len(rows) == 0 || (rows[0].Deleted && !deleted) {
		return persistence.Schedule{}, fmt.Errorf("%w: %q", persistence.ErrScheduleNotFound, name)
	}
	return rows[0].record(), nil
}

// ScheduleList implements persistence.Store.
func (s *Store) ScheduleList(ctx context.Context) ([]persistence.Schedule, error) {
	var rows []scheduleRow
	if err := s.selectAll(ctx, s.db, &rows, `SELECT `+scheduleCols+` FROM schedules WHERE deleted = ? ORDER BY name`, false); err != nil {
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
		set, args := "updated_at = ?, changed_at = ?", []any{s.t(now), s.t(now)}
		if p.Paused != nil {
			set += ", paused = ?"
			args = append(args, *p.Paused)
		}
		if p.Disabled != nil {
			set += ", disabled = ?"
			args = append(args, *p.Disabled)
		}
		n, err := s.exec(ctx, q, `UPDATE schedules SET `+set+` WHERE name = ? AND deleted = ?`, append(args, p.Name, false)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: %q", persistence.ErrScheduleNotFound, p.Name)
		}
		out, err = s.scheduleGet(ctx, q, p.Name, false)
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
	query := `UPDATE schedules SET last_tick = ?, updated_at = ? WHERE name = ? AND deleted = 0 AND last_tick IS NULL`
	args := []any{s.t(to), s.t(now), p.Name}
	if p.From != nil {
		query = `UPDATE schedules SET last_tick = ?, updated_at = ? WHERE name = ? AND deleted = 0 AND last_tick = ?`
		args = append(args, s.t(norm(*p.From)))
	}
	n, err := s.exec1(ctx, query, args...)
	if err != nil {
		return false, wrap("schedule advance", err)
	}
	if n > 0 {
		return true, nil
	}
	ok, err := s.exists(ctx, s.db, `SELECT 1 FROM schedules WHERE name = ? AND deleted = 0`, p.Name)
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
