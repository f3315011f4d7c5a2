package seed

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/dagflow/dagflow/persistence"
)

// Step is one step of the runs FinishedRuns writes.
type Step struct {
	Name string
	Deps []string // names of earlier steps of the same run
}

// Params are the arguments of FinishedRuns.
type Params struct {
	// Runs is how many finished runs the history holds once written.
	Runs int
	// First is the index of the first run to write: runs [0, First) are
	// taken as written before (by an earlier, perhaps interrupted, call
	// with the same Runs), so a large history can be topped up. Their
	// creation times are spread as if all Runs were written at once.
	First int
	// Workflow names the runs' workflow. Default "order".
	Workflow string
	// Steps are the steps of every run, each succeeded with one succeeded
	// attempt. Default the order workflow: reserve -> notify || points -> ship.
	Steps []Step
	// Queue is the steps' queue. Default "default".
	Queue string
	// Output is every step's output (JSON). Default {"ok":true}.
	Output []byte
	// Span spreads the runs' creation times evenly over the Span before
	// End; each run takes a few milliseconds. Default 30 days.
	Span time.Duration
	// End is when the newest seeded run was created. Default now.
	End time.Time
	// Batch is how many runs one transaction writes (two multi-row
	// INSERTs: runs, steps). Default 1000.
	Batch int
	// Concurrency is how many batches are written at once. Default 4.
	Concurrency int
	// Progress, when set, is called after each committed batch with
	// First plus the number of runs this call has written so far.
	Progress func(done int)
}

// DefaultSteps are the steps of the order workflow.
var DefaultSteps = []Step{
	{Name: "reserve"},
	{Name: "notify", Deps: []string{"reserve"}},
	{Name: "points", Deps: []string{"reserve"}},
	{Name: "ship", Deps: []string{"notify", "points"}},
}

// mysqlMaxPlaceholders is the protocol's limit on the parameters of one
// prepared statement.
const mysqlMaxPlaceholders = 65535

func (p Params) withDefaults() Params {
	if p.Workflow == "" {
		p.Workflow = "order"
	}
	if len(p.Steps) == 0 {
		p.Steps = DefaultSteps
	}
	if p.Queue == "" {
		p.Queue = "default"
	}
	if p.Output == nil {
		p.Output = []byte(`{"ok":true}`)
	}
	if p.Span <= 0 {
		p.Span = 30 * 24 * time.Hour
	}
	if p.End.IsZero() {
		p.End = time.Now()
	}
	if p.Batch <= 0 {
		p.Batch = 1000
	}
	// Every statement must stay under the placeholder limit.
	if most := mysqlMaxPlaceholders / (len(stepTable.cols) * len(p.Steps)); p.Batch > most {
		p.Batch = most
	}
	if p.Concurrency <= 0 {
		p.Concurrency = 4
	}
	return p
}

func (p Params) validate() error {
	if p.Runs < 0 {
		return fmt.Errorf("seed: Params.Runs %d is negative", p.Runs)
	}
	if p.First < 0 || p.First > p.Runs {
		return fmt.Errorf("seed: Params.First %d is not within [0, Runs %d]", p.First, p.Runs)
	}
	seen := map[string]bool{}
	for _, s := range p.Steps {
		if s.Name == "" || strings.Contains(s.Name, ",") {
			return fmt.Errorf("seed: step name %q is empty or has a comma", s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("seed: step %q is declared twice", s.Name)
		}
		for _, d := range s.Deps {
			if !seen[d] {
				return fmt.Errorf("seed: step %q depends on %q, which is not an earlier step", s.Name, d)
			}
		}
		seen[s.Name] = true
	}
	return nil
}

// FinishedRuns writes p.Runs succeeded runs, with their succeeded steps
// (each holding its one succeeded attempt, as the engine leaves them),
// straight into the tables of the MySQL database db, which the mysql
// store's migrations have created, in batches of multi-row INSERTs (one
// transaction per batch), for benchmarks and capacity tests that need a
// large history. The rows are what the engine leaves behind for a run that
// succeeded; run ids are UUIDv7 of the runs' creation times, all before
// p.End. It is not an engine operation: nothing is dispatched and no
// invariant is checked beyond what the schema enforces.
func FinishedRuns(ctx context.Context, db *sql.DB, p Params) error {
	p = p.withDefaults()
	if err := p.validate(); err != nil {
		return err
	}
	if p.Runs == p.First {
		return nil
	}
	dependents := make([]string, len(p.Steps))
	for i, st := range p.Steps {
		var ds []string
		for _, other := range p.Steps {
			if slices.Contains(other.Deps, st.Name) {
				ds = append(ds, other.Name)
			}
		}
		dependents[i] = strings.Join(ds, ",")
	}
	// Runs are spread evenly over the span, oldest first.
	gap := p.Span / time.Duration(p.Runs)
	start := p.End.Add(-p.Span).UTC().Truncate(time.Microsecond)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		written  int
	)
	sem := make(chan struct{}, p.Concurrency)
	for lo := p.First; lo < p.Runs && ctx.Err() == nil; lo += p.Batch {
		hi := min(lo+p.Batch, p.Runs)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := writeBatch(ctx, db, p, dependents, start, gap, lo, hi)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			written += hi - lo
			if p.Progress != nil {
				p.Progress(p.First + written)
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return fmt.Errorf("seed: finished runs: %w", firstErr)
	}
	return nil
}

// writeBatch writes runs [lo, hi) in one transaction: with LOAD DATA
// LOCAL INFILE from an in-memory stream when the server allows it (several
// times faster: nothing to parse but the rows), else with multi-row INSERTs.
func writeBatch(ctx context.Context, db *sql.DB, p Params, dependents []string, start time.Time, gap time.Duration, lo, hi int) error {
	n := hi - lo
	nSteps := len(p.Steps)
	runRows := make([][]any, 0, n)
	stepRows := make([][]any, 0, n*nSteps)
	for i := lo; i < hi; i++ {
		created := start.Add(time.Duration(i) * gap)
		id, err := runID(created, i)
		if err != nil {
			return err
		}
		// Each step takes a millisecond from queued to finished.
		t := created
		for j, st := range p.Steps {
			queued, started, finished := t, t.Add(200*time.Microsecond), t.Add(time.Millisecond)
			worker := "seed-" + strconv.Itoa(i%16)
			t = finished
			stepRows = append(stepRows, []any{id, st.Name, j, p.Workflow, p.Queue, strings.Join(st.Deps, ","),
				dependents[j], p.Output, queued, started, finished, finished, worker, started})
		}
		runRows = append(runRows, []any{id, p.Workflow, p.Output, created, created, created, t, t})
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	write := insertRows
	if loadData.Load() {
		write = loadRows
	}
	if err := write(ctx, tx, runTable, runRows); err != nil {
		if !isLocalInfileRefused(err) {
			return fmt.Errorf("write runs: %w", err)
		}
		// The server refuses LOAD DATA LOCAL: INSERTs from now on.
		loadData.Store(false)
		write = insertRows
		if err := write(ctx, tx, runTable, runRows); err != nil {
			return fmt.Errorf("write runs: %w", err)
		}
	}
	if err := write(ctx, tx, stepTable, stepRows); err != nil {
		return fmt.Errorf("write steps: %w", err)
	}
	return tx.Commit()
}

// table is one table FinishedRuns writes: the columns its rows give, and
// the constant values of the others.
type table struct {
	name      string
	cols      []string
	constCols []string
	consts    []string // SQL literals, one per constCols
}

var (
	runTable = table{
		name:      "workflow_runs",
		cols:      []string{"id", "workflow", "output", "start_at", "created_at", "started_at", "finished_at", "updated_at"},
		constCols: []string{"version", "status", "input", "error", "idempotency_key", "metadata", "schedule", "scheduled_tick"},
		consts:    []string{"0", "'" + string(persistence.RunSucceeded) + "'", "NULL", "NULL", "NULL", "NULL", "''", "NULL"},
	}
	stepTable = table{
		name: "step_runs",
		cols: []string{"run_id", "step", "seq", "workflow", "queue", "deps", "dependents", "output",
			"queued_at", "started_at", "finished_at", "updated_at", "worker", "claimed_at"},
		constCols: []string{"status", "attempt", "max_attempts", "pending_deps", "comp_attempt", "fence",
			"lease_expires_at", "next_attempt_at", "error"},
		consts: []string{"'" + string(persistence.StepSucceeded) + "'", "1", "3", "0", "0", "''", "NULL", "NULL", "NULL"},
	}
)

// loadData is cleared once a server refuses LOAD DATA LOCAL INFILE.
var loadData atomic.Bool

func init() { loadData.Store(true) }

// readerSeq names the in-memory files of concurrent LOAD DATA statements.
var readerSeq atomic.Int64

// insertRows writes rows into t with one multi-row INSERT.
func insertRows(ctx context.Context, tx *sql.Tx, t table, rowsArgs [][]any) error {
	args := make([]any, 0, len(rowsArgs)*len(t.cols))
	for _, r := range rowsArgs {
		args = append(args, r...)
	}
	tuple := "(" + strings.Repeat("?, ", len(t.cols)) + strings.Join(t.consts, ", ") + ")"
	q := "INSERT INTO " + t.name + " (" + strings.Join(t.cols, ", ") + ", " + strings.Join(t.constCols, ", ") + ") VALUES " +
		rows(len(rowsArgs), tuple)
	_, err := tx.ExecContext(ctx, q, args...)
	return err
}

// loadRows writes rows into t with LOAD DATA LOCAL INFILE, from a
// tab-separated stream built in memory (the driver's reader handler: no
// file, no allowAllFiles).
func loadRows(ctx context.Context, tx *sql.Tx, t table, rowsArgs [][]any) error {
	var b bytes.Buffer
	for _, r := range rowsArgs {
		for k, v := range r {
			if k > 0 {
				b.WriteByte('\t')
			}
			switch v := v.(type) {
			case string:
				writeTSV(&b, v)
			case []byte:
				writeTSV(&b, string(v))
			case int:
				b.WriteString(strconv.Itoa(v))
			case time.Time:
				b.WriteString(v.UTC().Format("2006-01-02 15:04:05.000000"))
			default:
				return fmt.Errorf("seed: no TSV form for %T", v)
			}
		}
		b.WriteByte('\n')
	}
	name := "dagflow-seed-" + strconv.FormatInt(readerSeq.Add(1), 10)
	gomysql.RegisterReaderHandler(name, func() io.Reader { return &b })
	defer gomysql.DeregisterReaderHandler(name)
	set := make([]string, len(t.constCols))
	for k, c := range t.constCols {
		set[k] = c + " = " + t.consts[k]
	}
	q := "LOAD DATA LOCAL INFILE 'Reader::" + name + "' INTO TABLE " + t.name +
		" CHARACTER SET binary (" + strings.Join(t.cols, ", ") + ") SET " + strings.Join(set, ", ")
	_, err := tx.ExecContext(ctx, q)
	return err
}

// writeTSV writes s escaped for LOAD DATA's default format.
func writeTSV(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '\t', '\n':
			b.WriteByte('\\')
			b.WriteByte(c)
		case 0:
			b.WriteString("\\0")
		default:
			b.WriteByte(c)
		}
	}
}

// isLocalInfileRefused reports whether err is a server's refusal of LOAD
// DATA LOCAL INFILE (local_infile off, or not allowed for the statement).
func isLocalInfileRefused(err error) bool {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1148, 3948, 2068:
			return true
		}
	}
	return strings.Contains(err.Error(), "local_infile") || strings.Contains(err.Error(), "LOCAL INFILE")
}

// rows returns n copies of tuple joined by commas.
func rows(n int, tuple string) string {
	var b strings.Builder
	b.Grow(n * (len(tuple) + 2))
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tuple)
	}
	return b.String()
}

// runID returns a UUIDv7 whose timestamp is t and whose random bits
// are made unique by i.
func runID(t time.Time, i int) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	ms := uint64(t.UnixMilli())
	for k := range 6 {
		id[k] = byte(ms >> (40 - 8*k))
	}
	// Bytes 10..15 (the node bits) carry the index, so ids of one batch
	// never collide even when they share a millisecond.
	for k := range 6 {
		id[15-k] = byte(uint64(i) >> (8 * k))
	}
	return id.String(), nil
}
