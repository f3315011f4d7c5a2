package sqlstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"

	"fmt"
	"strings"
	"time"

	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/persistence"
)

// Events: a published event's row, the runs it started (event_runs), the
// listings, and the outbox of events recorded in callers' transactions
// (dispatched_at NULL until an engine hands their runs to the queues).
// Indexes: MySQL migration 00010, SQLite 00009.

// MaxEventIDLen is the longest event id, in bytes.
const MaxEventIDLen = 128

// isEventID reports whether v is 1-128 characters of [A-Za-z0-9_.:-]
// starting with a letter or digit.
func isEventID(v string) bool {
	if len(v) == 0 || len(v) > MaxEventIDLen || (!isLetter(v[0]) && !isDigit(v[0])) {
		return false
	}
	for i := 1; i < len(v); i++ {
		if c := v[i]; !isLetter(c) && !isDigit(c) && c != '_' && c != '.' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func validEventID(v string) error {
	if !isEventID(v) {
		return invalid("event id", v, "must be 1-128 characters of [A-Za-z0-9_.:-] starting with a letter or digit")
	}
	return nil
}

func validEventName(v string) error {
	if !names.ValidEvent(v) {
		return invalid("event name", v, "must match "+names.EventPattern)
	}
	return nil
}

const eventCols = "id, name, payload, published_at, dispatched_at, correlation"

type eventRow struct {
	ID           string         `db:"id"`
	Name         string         `db:"name"`
	Payload      []byte         `db:"payload"`
	PublishedAt  dbTime         `db:"published_at"`
	DispatchedAt nullTime       `db:"dispatched_at"`
	Correlation  sql.NullString `db:"correlation"`
}

func (r eventRow) record() persistence.Event {
	e := persistence.Event{ID: r.ID, Name: r.Name, Payload: nonEmpty(r.Payload), PublishedAt: r.PublishedAt.T,
		Correlation: r.Correlation.String}
	if r.DispatchedAt.Valid {
		t := r.DispatchedAt.T
		e.DispatchedAt = &t
	}
	return e
}

type eventRunRow struct {
	EventID  string `db:"event_id"`
	Workflow string `db:"workflow"`
	RunID    string `db:"run_id"`
}

// planEvent checks an EventCreate and plans its runs.
func (s *Store) planEvent(p persistence.EventCreateParams) ([]runPlan, error) {
	if err := validEventID(p.ID); err != nil {
		return nil, err
	}
	if err := validEventName(p.Name); err != nil {
		return nil, err
	}
	if err := s.validJSON("event payload", p.Payload); err != nil {
		return nil, err
	}
	if err := validCorrelation(p.Correlation); err != nil {
		return nil, err
	}
	if err := validAliases(p.Correlation, p.CorrelationAliases); err != nil {
		return nil, err
	}
	plans := make([]runPlan, 0, len(p.Runs))
	seen := make(map[string]bool, len(p.Runs))
	for _, rp := range p.Runs {
		if rp.IdempotencyKey == "" {
			return nil, invalid("idempotency key", "", fmt.Sprintf("event %q: the run of workflow %q needs one", p.ID, rp.Workflow))
		}
		if seen[rp.Workflow] {
			return nil, invalid("workflow name", rp.Workflow, fmt.Sprintf("event %q starts it twice", p.ID))
		}
		seen[rp.Workflow] = true
		plan, err := s.planRun(rp)
		if err != nil {
			return nil, err
		}
		plans = append(plans, plan)
	}
	return plans, nil
}

// EventCreate implements persistence.Store.
func (s *Store) EventCreate(ctx context.Context, p persistence.EventCreateParams) (persistence.EventCreateResult, error) {
	plans, err := s.planEvent(p)
	if err != nil {
		return persistence.EventCreateResult{}, err
	}
	var res persistence.EventCreateResult
	err = s.write(ctx, func(q querier) error {
		var err error
		res, err = s.eventCreate(ctx, q, p, plans, p.Dispatched)
		return err
	})
	return res, wrap("event create", err)
}

// EventCreateTx implements persistence.TxStore.
func (s *Store) EventCreateTx(ctx context.Context, tx persistence.DBTX, p persistence.EventCreateParams) (persistence.EventCreateResult, error) {
	plans, err := s.planEvent(p)
	if err != nil {
		return persistence.EventCreateResult{}, err
	}
	res, err := s.eventCreate(ctx, tx, p, plans, false)
	return res, wrap("event create", err)
}

// eventCreate inserts the event first, with a duplicate id a no-op that
// tells it existed (Dialect.InsertOnce). The insert takes the id's key
// exclusively, so of concurrent creates of one id the others wait until
// the first commits, then find it with a locking (current) read and create
// nothing; if the first rolls back, one waiter's insert creates it and the
// rest wait on that one in turn. On MySQL a named lock per id lets one
// create at a time wait on the key (Dialect.NamedLockSQL). Exclusive locks throughout: waiters that
// held shared locks after a duplicate-key error would deadlock each other
// when the holder rolled back, and the deadlock victim's whole
// transaction (the application's, for EventCreateTx) would be rolled back.
func (s *Store) eventCreate(ctx context.Context, q querier, p persistence.EventCreateParams, plans []runPlan, dispatched bool) (persistence.EventCreateResult, error) {
	now := norm(p.Now)
	ev := persistence.Event{ID: p.ID, Name: p.Name, Payload: nonEmpty(p.Payload), PublishedAt: now, Correlation: p.Correlation}
	values := correlationValues(p.Correlation, p.CorrelationAliases)
	if p.Correlation != "" {
		// Before the event's own row: a park of the same (name,
		// correlation) takes this lock first too (StepPark).
		if err := s.lockCorrelation(ctx, q, p.Name, values); err != nil {
			return persistence.EventCreateResult{}, err
		}
	}
	var disp any
	if dispatched {
		ev.DispatchedAt = &now
		disp = s.t(now)
	}
	if s.d.NamedLockSQL != "" {
		unlock, err := s.namedLock(ctx, q, "dagflow-event:"+p.ID)
		if err != nil {
			return persistence.EventCreateResult{}, err
		}
		defer unlock()
	}
	r, err := q.ExecContext(ctx, s.d.rebind(`INSERT INTO events (`+eventCols+`) VALUES (?, ?, ?, ?, ?, ?)`+s.d.InsertOnce("id")),
		ev.ID, ev.Name, nullBytes(ev.Payload), s.t(now), disp, nullString(ev.Correlation))
	if err != nil {
		return persistence.EventCreateResult{}, err
	}
	existed, err := s.d.Existed(r)
	if err != nil {
		return persistence.EventCreateResult{}, err
	}
	if existed {
		stored, err := s.eventGet(ctx, q, p.ID, true)
		// A server that reports the insert id of the session rather than
		// of the statement (TiDB) says "existed" of the row just
		// inserted: the row is this call's when it is exactly what it
		// wrote and has no runs yet.
		if err != nil || !(len(stored.Runs) == 0 && stored.Name == ev.Name && stored.PublishedAt.Equal(now) &&
			bytes.Equal(stored.Payload, ev.Payload) && (stored.DispatchedAt == nil) == (ev.DispatchedAt == nil)) {
			return persistence.EventCreateResult{Event: stored}, err
		}
	}
	res := persistence.EventCreateResult{Created: true}
	var args []any
	for _, plan := range plans {
		r, err := s.runCreate(ctx, q, plan)
		if err != nil {
			return persistence.EventCreateResult{}, err
		}
		res.Runs = append(res.Runs, r)
		ev.Runs = append(ev.Runs, persistence.EventRun{Workflow: r.Run.Workflow, RunID: r.Run.ID})
		args = append(args, ev.ID, r.Run.Workflow, r.Run.ID)
	}
	if len(ev.Runs) > 0 {
		vals := strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(ev.Runs)), ", ")
		if _, err := s.exec(ctx, q, `INSERT INTO event_runs (event_id, workflow, run_id) VALUES `+vals, args...); err != nil {
			return persistence.EventCreateResult{}, err
		}
	}
	sortEventRuns(ev.Runs)
	res.Event = ev
	if ev.Correlation != "" {
		var err error
		if res.Resolved, err = s.resolveWaiters(ctx, q, ev, values, p.WaitOutput, now); err != nil {
			return persistence.EventCreateResult{}, err
		}
	}
	return res, nil
}

func sortEventRuns(runs []persistence.EventRun) {
	for i := 1; i < len(runs); i++ {
		for j := i; j > 0 && runs[j].Workflow < runs[j-1].Workflow; j-- {
			runs[j], runs[j-1] = runs[j-1], runs[j]
		}
	}
}

const eventGetSQL = `SELECT ` + eventCols + ` FROM events WHERE id = ?`

const eventRunsSQL = `SELECT event_id, workflow, run_id FROM event_runs WHERE event_id = ? ORDER BY workflow`

// EventGet implements persistence.Store.
func (s *Store) EventGet(ctx context.Context, id string) (persistence.Event, error) {
	if !isEventID(id) {
		return persistence.Event{}, fmt.Errorf("%w: %q", persistence.ErrEventNotFound, id)
	}
	ev, err := s.eventGet(ctx, s.db, id, false)
	return ev, wrap("event get", err)
}

func (s *Store) eventGet(ctx context.Context, q querier, id string, lock bool) (persistence.Event, error) {
	query := eventGetSQL
	if lock {
		query += s.d.ForUpdate
	}
	var rows []eventRow
	if err := s.selectAll(ctx, q, &rows, query, id); err != nil {
		return persistence.Event{}, err
	}
	if len(rows) == 0 {
		return persistence.Event{}, fmt.Errorf("%w: %q", persistence.ErrEventNotFound, id)
	}
	ev := rows[0].record()
	runsSQL := eventRunsSQL
	if lock {
		runsSQL += s.d.ForUpdate
	}
	var runs []eventRunRow
	if err := s.selectAll(ctx, q, &runs, runsSQL, id); err != nil {
		return persistence.Event{}, err
	}
	for _, r := range runs {
		ev.Runs = append(ev.Runs, persistence.EventRun{Workflow: r.Workflow, RunID: r.RunID})
	}
	return ev, nil
}

// withRuns fills the runs of events with one query (a primary-key prefix
// lookup per event).
func (s *Store) withRuns(ctx context.Context, q querier, evs []persistence.Event) error {
	if len(evs) == 0 {
		return nil
	}
	ids := make([]any, len(evs))
	at := make(map[string]int, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
		at[e.ID] = i
	}
	var runs []eventRunRow
	if err := s.selectAll(ctx, q, &runs, `SELECT event_id, workflow, run_id FROM event_runs WHERE event_id IN (`+
		in(len(ids))+`) ORDER BY event_id, workflow`, ids...); err != nil {
		return err
	}
	for _, r := range runs {
		i := at[r.EventID]
		evs[i].Runs = append(evs[i].Runs, persistence.EventRun{Workflow: r.Workflow, RunID: r.RunID})
	}
	return nil
}

// eventListQuery builds EventList's statement: newest first by
// (published_at, id), keyset-paged, one range of idx_events_published or,
// with a name, of idx_events_name_published (named, as RunList's are, so
// that a deep page is a seek from its cursor).
func (s *Store) eventListQuery(p persistence.EventListParams) (Query, int, error) {
	limit := clampLimit(p.Limit, 50, 1000)
	var where []string
	var args []any
	index := "idx_events_published"
	if p.Name != "" {
		if err := validEventName(p.Name); err != nil {
			return Query{}, 0, err
		}
		index = "idx_events_name_published"
		where = append(where, "name = ?")
		args = append(args, p.Name)
	}
	if !p.PublishedAfter.IsZero() {
		where = append(where, "published_at >= ?")
		args = append(args, s.t(norm(p.PublishedAfter)))
	}
	var before time.Time
	if !p.PublishedBefore.IsZero() {
		before = norm(p.PublishedBefore)
	}
	if p.Cursor != "" {
		parts, err := decodeCursor(p.Cursor, 2)
		if err != nil {
			return Query{}, 0, err
		}
		at, err := cursorTime(parts[0])
		if err != nil {
			return Query{}, 0, err
		}
		if !isEventID(parts[1]) {
			return Query{}, 0, invalid("cursor", p.Cursor, "not a cursor of this list")
		}
		if before.IsZero() || at.Before(before) {
			where = append(where, "published_at <= ? AND (published_at < ? OR (published_at = ? AND id < ?))")
			args = append(args, s.t(at), s.t(at), s.t(at), parts[1])
			before = time.Time{}
		}
	}
	if !before.IsZero() {
		where = append(where, "published_at < ?")
		args = append(args, s.t(before))
	}
	q := `SELECT ` + eventCols + ` FROM events` + s.d.useIndex(index)
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY published_at DESC, id DESC LIMIT ?`
	return Query{Name: "EventList", SQL: q, Args: append(args, limit+1)}, limit, nil
}

// EventList implements persistence.Store.
func (s *Store) EventList(ctx context.Context, p persistence.EventListParams) (persistence.EventPage, error) {
	qq, limit, err := s.eventListQuery(p)
	if err != nil {
		return persistence.EventPage{}, err
	}
	var rows []eventRow
	if err := s.selectAll(ctx, s.db, &rows, qq.SQL, qq.Args...); err != nil {
		return persistence.EventPage{}, wrap("event list", err)
	}
	var page persistence.EventPage
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = encodeCursor(last.PublishedAt.T, last.ID)
	}
	for _, r := range rows {
		page.Events = append(page.Events, r.record())
	}
	if err := s.withRuns(ctx, s.db, page.Events); err != nil {
		return persistence.EventPage{}, wrap("event list", err)
	}
	return page, nil
}

// eventPendingSQL reads the outbox: a range of idx_events_pending
// (dispatched_at, published_at, id) on its NULL entries.
const eventPendingSQL = `SELECT ` + eventCols + ` FROM events WHERE dispatched_at IS NULL AND published_at <= ?
	ORDER BY published_at, id LIMIT ?`

// EventListPending implements persistence.Store.
func (s *Store) EventListPending(ctx context.Context, p persistence.EventListPendingParams) ([]persistence.Event, error) {
	var rows []eventRow
	if err := s.selectAll(ctx, s.db, &rows, s.eventPendingSQL(), s.t(norm(p.Before)), clampLimit(p.Limit, 100, 1000)); err != nil {
		return nil, wrap("event list pending", err)
	}
	out := make([]persistence.Event, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	if err := s.withRuns(ctx, s.db, out); err != nil {
		return nil, wrap("event list pending", err)
	}
	return out, nil
}

func (s *Store) eventPendingSQL() string {
	return strings.Replace(eventPendingSQL, "FROM events", "FROM events"+s.d.useIndex("idx_events_pending"), 1)
}

// EventMarkDispatched implements persistence.Store.
func (s *Store) EventMarkDispatched(ctx context.Context, p persistence.EventMarkDispatchedParams) (int, error) {
	var ids []any
	for _, id := range p.IDs {
		if isEventID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.exec1(ctx, `UPDATE events SET dispatched_at = ? WHERE id IN (`+in(len(ids))+`) AND dispatched_at IS NULL`,
		append([]any{s.t(norm(p.Now))}, ids...)...)
	return int(n), wrap("event mark dispatched", err)
}

// EventQueries returns the events' reads for tests to EXPLAIN: EventList
// unfiltered and by name (first and later pages), the pending events,
// EventGet (of event "ev00001") and its runs, and the runs of a page.
func (s *Store) EventQueries(now time.Time) []Query {
	var out []Query
	for _, c := range []struct {
		name string
		p    persistence.EventListParams
	}{
		{"EventList/first", persistence.EventListParams{}},
		{"EventList/cursor", persistence.EventListParams{Cursor: encodeCursor(now.Add(-time.Minute), "e1")}},
		{"EventList@name", persistence.EventListParams{Name: "order.placed"}},
		{"EventList@name/window", persistence.EventListParams{Name: "order.placed", PublishedAfter: now.Add(-time.Hour), PublishedBefore: now}},
		{"EventList@name/cursor", persistence.EventListParams{Name: "order.placed", Cursor: encodeCursor(now.Add(-time.Minute), "e1")}},
	} {
		q, _, err := s.eventListQuery(c.p)
		if err != nil {
			panic(err)
		}
		q.Name = c.name
		out = append(out, q)
	}
	return append(out,
		Query{Name: "EventListPending", SQL: s.eventPendingSQL(), Args: []any{s.t(now), 100}},
		Query{Name: "EventGet", SQL: eventGetSQL, Args: []any{"ev00001"}},
		Query{Name: "EventRuns", SQL: eventRunsSQL, Args: []any{"ev00001"}},
		Query{Name: "EventRuns/page", SQL: `SELECT event_id, workflow, run_id FROM event_runs WHERE event_id IN (?, ?) ORDER BY event_id, workflow`, Args: []any{"ev00001", "ev00002"}},
	)
}

// namedLock takes the session lock of name (hashed to fit MySQL's 64
// characters) on q's connection, and returns its release.
func (s *Store) namedLock(ctx context.Context, q querier, name string) (func(), error) {
	sum := sha256.Sum256([]byte(name))
	key := "dagflow:" + hex.EncodeToString(sum[:24])
	var got sql.NullInt64
	if err := q.QueryRowContext(ctx, s.d.rebind(s.d.NamedLockSQL), key).Scan(&got); err != nil {
		return nil, fmt.Errorf("taking lock %s for %q: %w", key, name, err)
	}
	if !got.Valid || got.Int64 != 1 {
		return nil, fmt.Errorf("taking lock %s for %q: timed out", key, name)
	}
	return func() {
		var ignored sql.NullInt64
		_ = q.QueryRowContext(context.WithoutCancel(ctx), s.d.rebind(s.d.NamedUnlockSQL), key).Scan(&ignored)
	}, nil
}
