package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dagflow/dagflow/internal/jsoncheck"
	"github.com/dagflow/dagflow/persistence"
)

// Workflow definitions (MySQL migration 00008, SQLite 00007). A version
// is named by the hash of its plan, so its row never changes but for
// registered_at. current_of holds the workflow's name on its current
// version (latest registered_at, ties by the greater version) and NULL on
// the others, under a unique index: the current version of every
// workflow is one range of that index, whatever the number of versions
// kept.

const definitionCols = "workflow, version, declared, spec, created_at, registered_at"

type definitionRow struct {
	Workflow     string `db:"workflow"`
	Version      string `db:"version"`
	Declared     int    `db:"declared"`
	Spec         []byte `db:"spec"`
	CreatedAt    dbTime `db:"created_at"`
	RegisteredAt dbTime `db:"registered_at"`
}

func (r definitionRow) record() persistence.Definition {
	return persistence.Definition{
		Workflow:     r.Workflow,
		Version:      r.Version,
		Declared:     r.Declared,
		Spec:         r.Spec,
		CreatedAt:    r.CreatedAt.T,
		RegisteredAt: r.RegisteredAt.T,
	}
}

// validDefinition checks a definition to register.
func validDefinition(d persistence.Definition) error {
	if err := validName("workflow name", d.Workflow); err != nil {
		return err
	}
	if err := validDefinitionVersion(d.Version); err != nil {
		return err
	}
	if d.Declared < 1 {
		return invalid(fmt.Sprintf("workflow %q declared version", d.Workflow), strconv.Itoa(d.Declared), "must be at least 1")
	}
	field := fmt.Sprintf("workflow %q definition %s spec", d.Workflow, d.Version)
	switch {
	case len(d.Spec) == 0:
		return invalid(field, "", "is empty")
	case len(d.Spec) > persistence.MaxDefinitionSpec:
		return invalid(field, string(d.Spec), fmt.Sprintf("is %d bytes, over the limit of %d", len(d.Spec), persistence.MaxDefinitionSpec))
	}
	if err := jsoncheck.Check(d.Spec); err != nil {
		return invalid(field, string(d.Spec), err.Error())
	}
	if d.RegisteredAt.IsZero() {
		return invalid(fmt.Sprintf("workflow %q definition %s registration time", d.Workflow, d.Version), "", "is zero")
	}
	return nil
}

// The statements of the definitions, each served by an index (the tests
// EXPLAIN them through DefinitionQueries).
const (
	// definitionGetSQL reads one version by primary key.
	definitionGetSQL = `SELECT ` + definitionCols + ` FROM workflow_definitions WHERE workflow = ? AND version = ?`
	// definitionCurrentSQL reads a workflow's current version:
	// uq_definitions_current.
	definitionCurrentSQL = `SELECT version FROM workflow_definitions WHERE current_of = ?`
	// definitionCurrentRowSQL reads the whole current version, by the
	// same index.
	definitionCurrentRowSQL = `SELECT ` + definitionCols + ` FROM workflow_definitions WHERE current_of = ?`
)

// definitionLatestSQL reads the version a workflow's current one must be:
// the first entry of its range of idx_definitions_registered, read
// backwards.
func (s *Store) definitionLatestSQL() string {
	return `SELECT version FROM workflow_definitions` + s.d.useIndex("idx_definitions_registered") +
		` WHERE workflow = ? ORDER BY registered_at DESC, version DESC LIMIT 1`
}

// definitionListSQL lists one workflow's versions, latest registration
// first (a range of idx_definitions_registered, read backwards), or,
// without a workflow, the current version of every workflow by name (the
// non-NULL range of uq_definitions_current).
func (s *Store) definitionListSQL(workflow string) (string, []any) {
	if workflow == "" {
		return `SELECT ` + definitionCols + ` FROM workflow_definitions` + s.d.useIndex("uq_definitions_current") +
			` WHERE current_of IS NOT NULL ORDER BY current_of`, nil
	}
	return `SELECT ` + definitionCols + ` FROM workflow_definitions` + s.d.useIndex("idx_definitions_registered") +
		` WHERE workflow = ? ORDER BY registered_at DESC, version DESC`, []any{workflow}
}

// DefinitionUpsert implements persistence.Store. In one transaction it
// locks the workflow's current version (so that registrations of one
// workflow take turns), inserts the version or updates its
// registered_at, and moves the current mark to the version registered
// last. Two first registrations of a workflow find no current version to
// lock; the second to mark its version fails on the unique index and is
// run again, and then finds the first's.
func (s *Store) DefinitionUpsert(ctx context.Context, d persistence.Definition) (persistence.Definition, error) {
	if err := validDefinition(d); err != nil {
		return persistence.Definition{}, err
	}
	at := norm(d.RegisteredAt)
	var out persistence.Definition
	var err error
	for try := 0; ; try++ {
		err = s.write(ctx, func(q querier) error {
			var err error
			out, err = s.definitionUpsert(ctx, q, d, at)
			return err
		})
		if err == nil || try >= maxTxRetries || !s.d.IsDuplicate(err) || ctx.Err() != nil {
			break
		}
	}
	return out, wrap("definition upsert", err)
}

func (s *Store) definitionUpsert(ctx context.Context, q querier, d persistence.Definition, at time.Time) (persistence.Definition, error) {
	type versionRow struct {
		Version string `db:"version"`
	}
	var current []versionRow
	if err := s.selectAll(ctx, q, &current, definitionCurrentSQL+s.d.ForUpdate, d.Workflow); err != nil {
		return persistence.Definition{}, err
	}
	if _, err := s.exec(ctx, q, `INSERT INTO workflow_definitions (workflow, version, declared, spec, created_at, registered_at)
		VALUES (?, ?, ?, ?, ?, ?)`+s.d.Upsert([]string{"workflow", "version"}, []string{"registered_at"}),
		d.Workflow, d.Version, d.Declared, d.Spec, s.t(at), s.t(at)); err != nil {
		return persistence.Definition{}, err
	}
	var latest []versionRow
	if err := s.selectAll(ctx, q, &latest, s.definitionLatestSQL(), d.Workflow); err != nil {
		return persistence.Definition{}, err
	}
	if len(latest) == 0 {
		return persistence.Definition{}, fmt.Errorf("workflow %q has no versions after registering %s", d.Workflow, d.Version)
	}
	if len(current) == 0 || current[0].Version != latest[0].Version {
		var moves []stmt
		if len(current) > 0 {
			moves = append(moves, stmt{`UPDATE workflow_definitions SET current_of = NULL WHERE workflow = ? AND version = ?`,
				[]any{d.Workflow, current[0].Version}})
		}
		moves = append(moves, stmt{`UPDATE workflow_definitions SET current_of = ? WHERE workflow = ? AND version = ?`,
			[]any{d.Workflow, d.Workflow, latest[0].Version}})
		if err := s.execAll(ctx, q, moves...); err != nil {
			return persistence.Definition{}, err
		}
	}
	return s.definitionGet(ctx, q, d.Workflow, d.Version)
}

// DefinitionGet implements persistence.Store.
func (s *Store) DefinitionGet(ctx context.Context, workflow, version string) (persistence.Definition, error) {
	if err := definitionRef(workflow, version); err != nil {
		return persistence.Definition{}, err
	}
	d, err := s.definitionGet(ctx, s.db, workflow, version)
	return d, wrap("definition get", err)
}

func (s *Store) definitionGet(ctx context.Context, q querier, workflow, version string) (persistence.Definition, error) {
	var rows []definitionRow
	if err := s.selectAll(ctx, q, &rows, definitionGetSQL, workflow, version); err != nil {
		return persistence.Definition{}, err
	}
	if len(rows) == 0 {
		return persistence.Definition{}, fmt.Errorf("%w: workflow %q version %q", persistence.ErrDefinitionNotFound, workflow, version)
	}
	return rows[0].record(), nil
}

// DefinitionCurrent implements persistence.Store: one entry of
// uq_definitions_current.
func (s *Store) DefinitionCurrent(ctx context.Context, workflow string) (persistence.Definition, error) {
	if err := validName("workflow name", workflow); err != nil {
		return persistence.Definition{}, err
	}
	var rows []definitionRow
	if err := s.selectAll(ctx, s.db, &rows, definitionCurrentRowSQL, workflow); err != nil {
		return persistence.Definition{}, wrap("definition current", err)
	}
	if len(rows) == 0 {
		return persistence.Definition{}, fmt.Errorf("%w: workflow %q has no stored definition", persistence.ErrDefinitionNotFound, workflow)
	}
	return rows[0].record(), nil
}

// DefinitionList implements persistence.Store.
func (s *Store) DefinitionList(ctx context.Context, p persistence.DefinitionListParams) ([]persistence.Definition, error) {
	if p.Workflow != "" {
		if err := validName("workflow name", p.Workflow); err != nil {
			return nil, err
		}
	}
	query, args := s.definitionListSQL(p.Workflow)
	var rows []definitionRow
	if err := s.selectAll(ctx, s.db, &rows, query, args...); err != nil {
		return nil, wrap("definition list", err)
	}
	out := make([]persistence.Definition, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// DefinitionQueries returns the definitions' reads, for workflow "w1"
// where they name one, for tests to EXPLAIN: DefinitionList of every
// workflow's current version and of one workflow's versions,
// DefinitionGet, and the reads of DefinitionUpsert.
func (s *Store) DefinitionQueries() []Query {
	all, _ := s.definitionListSQL("")
	one, args := s.definitionListSQL("w1")
	return []Query{
		{Name: "DefinitionList", SQL: all},
		{Name: "DefinitionList@workflow", SQL: one, Args: args},
		{Name: "DefinitionGet", SQL: definitionGetSQL, Args: []any{"w1", "a1b2c3d4e5f60718"}},
		{Name: "DefinitionCurrent", SQL: definitionCurrentRowSQL, Args: []any{"w1"}},
		{Name: "DefinitionUpsert/current", SQL: definitionCurrentSQL + s.d.ForUpdate, Args: []any{"w1"}},
		{Name: "DefinitionUpsert/latest", SQL: s.definitionLatestSQL(), Args: []any{"w1"}},
	}
}
