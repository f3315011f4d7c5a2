package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/persistence/sqlstore"
	"github.com/dagflow/dagflow/persistence/storetest"
)

// TestStoreIDStableAndDistinct: a database keeps its id across reopens;
// two databases have different ids.
func TestStoreIDStableAndDistinct(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	id := func(path string) string {
		t.Helper()
		s, err := sqlite.Open(ctx, sqlite.Config{Path: path, AutoMigrate: true})
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		defer s.Close()
		v, err := s.StoreID(ctx)
		if err != nil || v == "" {
			t.Fatalf("StoreID = %q, %v", v, err)
		}
		return v
	}
	one, two := filepath.Join(dir, "one.db"), filepath.Join(dir, "two.db")
	first := id(one)
	if again := id(one); again != first {
		t.Errorf("store id after reopening = %q, want %q", again, first)
	}
	if other := id(two); other == first {
		t.Errorf("two databases share the store id %q", first)
	}
}

// TestUpgradeIsolation: a database at migration 00005, with runs in it,
// migrates to reconciling by workflow, a store id and the node registry.
func TestUpgradeIsolation(t *testing.T) {
	storetest.RunUpgradeIsolation(t, func(t *testing.T) (persistence.Store, func() error) {
		return atVersion(t, 5)
	})
}

// TestStepListQueuedManyWorkflows: over sqlstore.MaxDueWorkflows
// workflows with queued steps, a list over every workflow reads them all
// at once, still in due order and limited.
func TestStepListQueuedManyWorkflows(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	n := sqlstore.MaxDueWorkflows + 1
	// Workflow i's step is queued at a time that falls as i grows.
	for _, q := range []string{`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ? - 1)
		INSERT INTO workflow_runs (id, workflow, version, status, schedule, start_at, created_at, updated_at)
		SELECT printf('r%05d', i), printf('w%05d', i), 1, 'running', '', '2026-01-01 00:00:00.000000',
			'2026-01-01 00:00:00.000000', '2026-01-01 00:00:00.000000' FROM c`,
		`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ? - 1)
		INSERT INTO step_runs (run_id, step, seq, workflow, queue, status, deps, dependents, pending_deps, attempt,
			max_attempts, queued_at, updated_at)
		SELECT printf('r%05d', i), 'a', 0, printf('w%05d', i), 'q', 'queued', '', '', 0, 0, 3,
			strftime('%Y-%m-%d %H:%M:%S', '2026-01-01', '-' || i || ' seconds') || '.000000', '2026-01-01 00:00:00.000000' FROM c`,
	} {
		if _, err := s.DB().ExecContext(ctx, q, n); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.StepListQueued(ctx, persistence.ListDueParams{Before: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, st := range got {
		runs = append(runs, st.RunID)
	}
	want := []string{fmt.Sprintf("r%05d", n-1), fmt.Sprintf("r%05d", n-2), fmt.Sprintf("r%05d", n-3)}
	if !slices.Equal(runs, want) {
		t.Errorf("StepListQueued over %d workflows = %v, want %v", n, runs, want)
	}
}
