package mysql_test

import (
	"context"
	"testing"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/storetest"
)

// TestStoreIDStableAndDistinct: a database keeps its id across reopens
// (and a second migration); two databases have different ids.
func TestStoreIDStableAndDistinct(t *testing.T) {
	ctx := context.Background()
	id := func(dsn string) string {
		t.Helper()
		s, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true})
		if err != nil {
			t.Fatalf("mysql.Open: %v", err)
		}
		defer s.Close()
		v, err := s.StoreID(ctx)
		if err != nil || v == "" {
			t.Fatalf("StoreID = %q, %v", v, err)
		}
		return v
	}
	one, two := testenv.MySQLDatabase(t), testenv.MySQLDatabase(t)
	first := id(one)
	if again := id(one); again != first {
		t.Errorf("store id after reopening = %q, want %q", again, first)
	}
	if other := id(two); other == first {
		t.Errorf("two databases share the store id %q", first)
	}
}

// TestUpgradeIsolation: a database at migration 00006, with runs in it,
// migrates to reconciling by workflow, a store id and the node registry.
func TestUpgradeIsolation(t *testing.T) {
	storetest.RunUpgradeIsolation(t, func(t *testing.T) (persistence.Store, func() error) {
		return atVersion(t, 6)
	})
}
