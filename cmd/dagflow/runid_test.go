package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
)

// TestRunsTakeIDPrefixes: the short ids `dagflow dev` prints name their
// runs in `runs show`, with or without dashes; a prefix several runs
// share is refused with the matching ids; one under 8 characters with a
// message that says so; `runs pause` takes a prefix too and names the
// whole id.
func TestRunsTakeIDPrefixes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := filepath.Join(t.TempDir(), "dev.db")
	code, out, errb := runCLI(t, ctx, "dev", "--once", "-db", db, "-runs", "2")
	if code != 0 {
		t.Fatalf("dagflow dev exited %d\n%s\n%s", code, out, errb)
	}
	m := regexp.MustCompile(`(?m)^run (\S+) finished:`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("dev printed no run id:\n%s", out)
	}
	short := m[1]
	if len(short) < persistence.MinRunIDPrefix {
		t.Fatalf("dev printed %q: shorter than a prefix the commands take", short)
	}
	for _, arg := range []string{short, strings.ReplaceAll(short, "-", "")} {
		code, out, errb := runCLI(t, ctx, "runs", "show", arg, "--sqlite", db)
		if code != 0 || !regexp.MustCompile(`(?m)^run `+regexp.QuoteMeta(short)+`[0-9a-f-]{18} `).MatchString(out) {
			t.Errorf("runs show %s exited %d:\n%s\n%s", arg, code, out, errb)
		}
	}

	st, err := sqlite.Open(ctx, sqlite.Config{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	var shared []string
	for i := range 3 {
		id := fmt.Sprintf("0190a1b9-0000-7000-8000-%012d", i)
		if i == 2 {
			id = "0190a1ba-0000-7000-8000-000000000000"
		}
		if _, err := st.RunCreate(ctx, persistence.RunCreateParams{ID: id, Workflow: "order", Version: 1, Now: time.Now(),
			StartAt: time.Now().Add(time.Hour), Steps: []persistence.StepSpec{{Name: "a"}}}); err != nil {
			t.Fatal(err)
		}
		shared = append(shared, id)
	}
	st.Close()
	code, out, errb = runCLI(t, ctx, "runs", "show", "0190a1b9", "--sqlite", db)
	if code == 0 || !strings.Contains(errb, shared[0]) || !strings.Contains(errb, shared[1]) || !strings.Contains(errb, "more than one run") {
		t.Errorf("runs show of a shared prefix exited %d:\n%s\n%s", code, out, errb)
	}
	code, _, errb = runCLI(t, ctx, "runs", "show", "0190a1b", "--sqlite", db)
	if code == 0 || !strings.Contains(errb, "a run id prefix needs at least 8 characters") {
		t.Errorf("runs show of a 7-character prefix exited %d: %s", code, errb)
	}
	code, out, errb = runCLI(t, ctx, "runs", "pause", "0190a1ba", "--sqlite", db)
	if code != 0 || !strings.Contains(out, "run "+shared[2]+" paused") {
		t.Errorf("runs pause of a prefix exited %d:\n%s\n%s", code, out, errb)
	}
}
