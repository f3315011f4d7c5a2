//go:build !nodev

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestBenchCommand checks the command's wiring; internal/bench tests the
// measurements and the report.
func TestBenchCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"bench", "--embedded", "--runs", "20", "--warmup", "0", "--workers", "8", "--json-only"}, &out, &errb); code != 0 {
		t.Fatalf("dagflow bench exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &res) != nil || res["runs"] != 20.0 {
		t.Errorf("--json-only printed %q, want one JSON line of 20 runs", out.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "0"}, "-runs 0"},
		{[]string{"--rate", "fast"}, `"fast" is not a positive number`},
		{[]string{"extra"}, "unexpected argument"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(ctx, append([]string{"bench"}, tc.args...), &out, &errb); code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("bench %v exited %d with %q, want an error naming %q", tc.args, code, errb.String(), tc.want)
		}
	}
	out.Reset()
	errb.Reset()
	if code := run(ctx, []string{"bench", "-h"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "--latency-log") {
		t.Errorf("bench -h exited %d with %q, want the flags", code, out.String())
	}
}

// TestBenchTracing: --tracing measures an engine that makes spans, and
// the JSON line says so.
func TestBenchTracing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"bench", "--embedded", "--runs", "20", "--warmup", "0", "--workers", "8", "--tracing", "--json-only"}, &out, &errb); code != 0 {
		t.Fatalf("dagflow bench --tracing exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	var res map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &res); err != nil || res["tracing"] != true || res["runs"] != 20.0 || res["errors"] != 0.0 {
		t.Errorf("bench --tracing printed %q (%v), want one JSON line of 20 runs with tracing true and no errors", out.String(), err)
	}
}
