//go:build !nodev

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDevRunsToCompletion runs `dagflow dev --once` as a user would on a
// fresh machine: no servers, a new SQLite file.
func TestDevRunsToCompletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := filepath.Join(t.TempDir(), "dev.db")
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"dev", "--once", "-db", db, "-runs", "6"}, &out, &errb); code != 0 {
		t.Fatalf("dagflow dev exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	got := out.String()
	for _, want := range []string{"succeeded", "compensated", "failed", "skipped", "retrying", "final states:"} {
		if !strings.Contains(got, want) {
			t.Errorf("dev output lacks %q:\n%s", want, got)
		}
	}
	// A second session on the same file starts new runs and finishes them.
	out.Reset()
	if code := run(ctx, []string{"dev", "--once", "-db", db, "-runs", "2"}, &out, &errb); code != 0 {
		t.Fatalf("second dagflow dev exited %d\n%s\n%s", code, out.String(), errb.String())
	}
}

func TestUnknownCommandAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"frobnicate"}, &out, &errb); code != 2 {
		t.Errorf("unknown command exited %d, want 2", code)
	}
	if !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Errorf("stderr %q does not name the command", errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "dev") {
		t.Errorf("help exited %d with %q", code, out.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"dev", "-runs", "0"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "-runs 0") {
		t.Errorf("dev -runs 0 exited %d with %q", code, errb.String())
	}
}
