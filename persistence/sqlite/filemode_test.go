package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dagflow/dagflow/persistence/sqlite"
)

// TestNewFileIsPrivate: a database file that Open creates, and the WAL
// files beside it, are readable by their owner only (they hold every
// run's input and output); a file that exists keeps its mode.
func TestNewFileIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dev.db")
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s: mode %v, want -rw-------", filepath.Base(p), m)
		}
	}

	shared := filepath.Join(dir, "shared.db")
	if err := os.WriteFile(shared, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o640)
	s2, err := sqlite.Open(context.Background(), sqlite.Config{Path: shared, AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if fi, err := os.Stat(shared); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("an existing file: %v, %v; want its mode -rw-r----- kept", fi.Mode(), err)
	}
}
