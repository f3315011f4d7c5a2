package sqlstore

import (
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// dbTime scans a DATETIME (time.Time) or the SQLite text form.
type dbTime struct{ T time.Time }

func (t *dbTime) Scan(v any) error {
	switch x := v.(type) {
	case time.Time:
		t.T = x.UTC()
		return nil
	case string:
		return t.parse(x)
	case []byte:
		return t.parse(string(x))
	case nil:
		t.T = time.Time{}
		return nil
	}
	return fmt.Errorf("sqlstore: cannot scan %T into a time", v)
}

func (t *dbTime) parse(s string) error {
	p, err := time.ParseInLocation(TimeLayout, s, time.UTC)
	if err != nil {
		// Accept RFC 3339 too (hand-written rows).
		if p2, err2 := time.Parse(time.RFC3339Nano, s); err2 == nil {
			t.T = p2.UTC()
			return nil
		}
		return fmt.Errorf("sqlstore: bad time %q: %w", s, err)
	}
	t.T = p
	return nil
}

// nullTime scans a nullable time.
type nullTime struct {
	T     time.Time
	Valid bool
}

func (t *nullTime) Scan(v any) error {
	if v == nil {
		*t = nullTime{}
		return nil
	}
	var d dbTime
	if err := d.Scan(v); err != nil {
		return err
	}
	*t = nullTime{T: d.T, Valid: true}
	return nil
}

func (t nullTime) ptr() *time.Time {
	if !t.Valid {
		return nil
	}
	v := t.T
	return &v
}

// Value is unused (arguments go through Dialect.Time) but keeps the type
// honest if it is ever passed back.
func (t nullTime) Value() (driver.Value, error) {
	if !t.Valid {
		return nil, nil
	}
	return t.T, nil
}

const runCols = "id, workflow, version, status, input, output, error, idempotency_key, metadata, schedule, scheduled_tick, start_at, created_at, started_at, finished_at, updated_at, definition, priority, paused_at, parent_run_id, parent_step"

// runColsNoPayloads is runCols with the payloads left unread (NULL), for
// RunList with NoPayloads.
var runColsNoPayloads = strings.Replace(runCols, "input, output,", "NULL AS input, NULL AS output,", 1)

type runRow struct {
	ID             string         `db:"id"`
	Workflow       string         `db:"workflow"`
	Version        int            `db:"version"`
	Status         string         `db:"status"`
	Input          []byte         `db:"input"`
	Output         []byte         `db:"output"`
	Error          sql.NullString `db:"error"`
	IdempotencyKey sql.NullString `db:"idempotency_key"`
	Metadata       []byte         `db:"metadata"`
	Schedule       string         `db:"schedule"`
	ScheduledTick  nullTime       `db:"scheduled_tick"`
	StartAt        dbTime         `db:"start_at"`
	CreatedAt      dbTime         `db:"created_at"`
	StartedAt      nullTime       `db:"started_at"`
	FinishedAt     nullTime       `db:"finished_at"`
	UpdatedAt      dbTime         `db:"updated_at"`
	Definition     string         `db:"definition"`
	Priority       int            `db:"priority"`
	PausedAt       nullTime       `db:"paused_at"`
	ParentRunID    string         `db:"parent_run_id"`
	ParentStep     string         `db:"parent_step"`
}

var runColList = strings.Split(runCols, ", ")

// scanRunRows appends the rows, which have the columns of runCols in
// order, to dest, as scanStepRows does for steps.
func scanRunRows(rows *sql.Rows, dest *[]runRow) error {
	for rows.Next() {
		*dest = append(*dest, runRow{})
		r := &(*dest)[len(*dest)-1]
		if err := rows.Scan(&r.ID, &r.Workflow, &r.Version, &r.Status, &r.Input, &r.Output, &r.Error,
			&r.IdempotencyKey, &r.Metadata, &r.Schedule, &r.ScheduledTick, &r.StartAt, &r.CreatedAt,
			&r.StartedAt, &r.FinishedAt, &r.UpdatedAt, &r.Definition, &r.Priority, &r.PausedAt,
			&r.ParentRunID, &r.ParentStep); err != nil {
			*dest = (*dest)[:len(*dest)-1]
			return err
		}
	}
	return rows.Err()
}

func (r runRow) record() (persistence.Run, error) {
	run := persistence.Run{
		ID:             r.ID,
		Workflow:       r.Workflow,
		Version:        r.Version,
		Definition:     r.Definition,
		Status:         persistence.RunStatus(r.Status),
		Input:          nonEmpty(r.Input),
		Output:         nonEmpty(r.Output),
		Error:          r.Error.String,
		IdempotencyKey: r.IdempotencyKey.String,
		Schedule:       r.Schedule,
		ScheduledTick:  r.ScheduledTick.ptr(),
		StartAt:        r.StartAt.T,
		CreatedAt:      r.CreatedAt.T,
		StartedAt:      r.StartedAt.ptr(),
		FinishedAt:     r.FinishedAt.ptr(),
		UpdatedAt:      r.UpdatedAt.T,
		Priority:       r.Priority,
		PausedAt:       r.PausedAt.ptr(),
		ParentRunID:    r.ParentRunID,
		ParentStep:     r.ParentStep,
	}
	if len(r.Metadata) > 0 {
		if err := json.Unmarshal(r.Metadata, &run.Metadata); err != nil {
			return run, fmt.Errorf("sqlstore: run %s: metadata: %w", r.ID, err)
		}
	}
	return run, nil
}

const stepCols = "run_id, step, seq, workflow, queue, status, deps, dependents, attempt, max_attempts, pending_deps, comp_attempt, fence, lease_expires_at, next_attempt_at, output, error, queued_at, started_at, finished_at, updated_at, worker, claimed_at, reruns, priority"

type stepRow struct {
	RunID          string         `db:"run_id"`
	Step           string         `db:"step"`
	Seq            int            `db:"seq"`
	Workflow       string         `db:"workflow"`
	Queue          string         `db:"queue"`
	Status         string         `db:"status"`
	Deps           string         `db:"deps"`
	Dependents     string         `db:"dependents"`
	Attempt        int            `db:"attempt"`
	MaxAttempts    int            `db:"max_attempts"`
	PendingDeps    int            `db:"pending_deps"`
	CompAttempt    int            `db:"comp_attempt"`
	Fence          string         `db:"fence"`
	LeaseExpiresAt nullTime       `db:"lease_expires_at"`
	NextAttemptAt  nullTime       `db:"next_attempt_at"`
	Output         []byte         `db:"output"`
	Error          sql.NullString `db:"error"`
	QueuedAt       nullTime       `db:"queued_at"`
	StartedAt      nullTime       `db:"started_at"`
	FinishedAt     nullTime       `db:"finished_at"`
	UpdatedAt      dbTime         `db:"updated_at"`
	// Worker and ClaimedAt describe the forward attempt in progress
	// (status running); ClaimedAt is NULL for one claimed before
	// migration 00005 (MySQL) / 00004 (SQLite), whose attempt row exists.
	Worker    string   `db:"worker"`
	ClaimedAt nullTime `db:"claimed_at"`
	// Reruns counts the operator's reruns of the step after it completed.
	Reruns   int `db:"reruns"`
	Priority int `db:"priority"`
	// OutputSize is the stored output's length, read by the queries that
	// select output_size after stepCols (and may leave Output unloaded).
	OutputSize int64 `db:"output_size"`
}

var stepColList = strings.Split(stepCols, ", ")

// stepColListSized is stepColList and output_size.
var stepColListSized = append(slices.Clone(stepColList), "output_size")

// scanStepRows appends the rows, which must have the columns of stepCols
// in order (every step query selects them), and optionally output_size
// after them, to dest.
func scanStepRows(rows *sql.Rows, dest *[]stepRow) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	sized := slices.Equal(cols, stepColListSized)
	if !sized && !slices.Equal(cols, stepColList) {
		return fmt.Errorf("sqlstore: step rows must have the columns %s, not %s", stepCols, strings.Join(cols, ", "))
	}
	for rows.Next() {
		// Scanned in place: a row scanned into a local and then
		// appended would be allocated twice.
		*dest = append(*dest, stepRow{})
		r := &(*dest)[len(*dest)-1]
		fields := []any{&r.RunID, &r.Step, &r.Seq, &r.Workflow, &r.Queue, &r.Status, &r.Deps, &r.Dependents,
			&r.Attempt, &r.MaxAttempts, &r.PendingDeps, &r.CompAttempt, &r.Fence, &r.LeaseExpiresAt, &r.NextAttemptAt,
			&r.Output, &r.Error, &r.QueuedAt, &r.StartedAt, &r.FinishedAt, &r.UpdatedAt, &r.Worker, &r.ClaimedAt, &r.Reruns, &r.Priority, &r.OutputSize}
		if !sized {
			fields = fields[:len(fields)-1]
		}
		if err := rows.Scan(fields...); err != nil {
			*dest = (*dest)[:len(*dest)-1]
			return err
		}
	}
	return rows.Err()
}

func (r stepRow) record() persistence.StepRun {
	return persistence.StepRun{
		RunID:          r.RunID,
		Step:           r.Step,
		Queue:          r.Queue,
		Status:         persistence.StepStatus(r.Status),
		Deps:           splitNames(r.Deps),
		Attempt:        r.Attempt,
		MaxAttempts:    r.MaxAttempts,
		PendingDeps:    r.PendingDeps,
		CompAttempt:    r.CompAttempt,
		Reruns:         r.Reruns,
		Fence:          r.Fence,
		LeaseExpiresAt: r.LeaseExpiresAt.ptr(),
		NextAttemptAt:  r.NextAttemptAt.ptr(),
		Output:         nonEmpty(r.Output),
		Error:          r.Error.String,
		QueuedAt:       r.QueuedAt.ptr(),
		StartedAt:      r.StartedAt.ptr(),
		FinishedAt:     r.FinishedAt.ptr(),
		UpdatedAt:      r.UpdatedAt.T,
		Priority:       r.Priority,
	}
}

func stepRecords(rows []stepRow) []persistence.StepRun {
	out := make([]persistence.StepRun, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out
}

const attemptCols = "id, run_id, step, kind, attempt, worker, outcome, error, started_at, finished_at"

type attemptRow struct {
	ID         int64          `db:"id"`
	RunID      string         `db:"run_id"`
	Step       string         `db:"step"`
	Kind       string         `db:"kind"`
	Attempt    int            `db:"attempt"`
	Worker     string         `db:"worker"`
	Outcome    string         `db:"outcome"`
	Error      sql.NullString `db:"error"`
	StartedAt  dbTime         `db:"started_at"`
	FinishedAt nullTime       `db:"finished_at"`
}

func (r attemptRow) record() persistence.Attempt {
	return persistence.Attempt{
		ID:         r.ID,
		RunID:      r.RunID,
		Step:       r.Step,
		Kind:       persistence.AttemptKind(r.Kind),
		Attempt:    r.Attempt,
		Worker:     r.Worker,
		Outcome:    persistence.AttemptOutcome(r.Outcome),
		Error:      r.Error.String,
		StartedAt:  r.StartedAt.T,
		FinishedAt: r.FinishedAt.ptr(),
	}
}

const scheduleCols = "name, spec, time_zone, workflow, input, overlap_policy, catch_up, catch_up_window_us, paused, disabled, last_tick, created_at, updated_at, owner, deleted, changed_at"

type scheduleRow struct {
	Name          string   `db:"name"`
	Spec          string   `db:"spec"`
	TimeZone      string   `db:"time_zone"`
	Workflow      string   `db:"workflow"`
	Input         []byte   `db:"input"`
	Overlap       string   `db:"overlap_policy"`
	CatchUp       string   `db:"catch_up"`
	CatchUpWindow int64    `db:"catch_up_window_us"`
	Paused        bool     `db:"paused"`
	Disabled      bool     `db:"disabled"`
	LastTick      nullTime `db:"last_tick"`
	CreatedAt     dbTime   `db:"created_at"`
	UpdatedAt     dbTime   `db:"updated_at"`
	Owner         string   `db:"owner"`
	Deleted       bool     `db:"deleted"`
	ChangedAt     dbTime   `db:"changed_at"`
}

func (r scheduleRow) record() persistence.Schedule {
	return persistence.Schedule{
		Name:          r.Name,
		Spec:          r.Spec,
		TimeZone:      r.TimeZone,
		Workflow:      r.Workflow,
		Input:         nonEmpty(r.Input),
		Overlap:       r.Overlap,
		CatchUp:       r.CatchUp,
		CatchUpWindow: time.Duration(r.CatchUpWindow) * time.Microsecond,
		Paused:        r.Paused,
		Disabled:      r.Disabled,
		LastTick:      r.LastTick.ptr(),
		CreatedAt:     r.CreatedAt.T,
		UpdatedAt:     r.UpdatedAt.T,
		Owner:         r.Owner,
		Deleted:       r.Deleted,
		ChangedAt:     r.ChangedAt.T,
	}
}

const tickCols = "schedule, tick, outcome, run_id, reason, created_at"

type tickRow struct {
	Schedule  string         `db:"schedule"`
	Tick      dbTime         `db:"tick"`
	Outcome   string         `db:"outcome"`
	RunID     string         `db:"run_id"`
	Reason    sql.NullString `db:"reason"`
	CreatedAt dbTime         `db:"created_at"`
}

func (r tickRow) record() persistence.ScheduleTick {
	return persistence.ScheduleTick{
		Schedule:  r.Schedule,
		Tick:      r.Tick.T,
		Outcome:   r.Outcome,
		RunID:     r.RunID,
		Reason:    r.Reason.String,
		CreatedAt: r.CreatedAt.T,
	}
}

func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// Step names never contain commas (see validName), so a step's
// dependencies and dependents are stored as comma-joined lists.
func joinNames(names []string) string { return strings.Join(names, ",") }

func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
