package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
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
		ctx := context.Background()
		s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "dagflow.db")})
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.MigrateTo(ctx, 5); err != nil {
			t.Fatalf("migrating to 5: %v", err)
		}
		return s, func() error { return s.Migrate(ctx) }
	})
}
