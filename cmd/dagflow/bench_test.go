//go:build !nodev

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/bench"
	"github.com/dagflow/dagflow/internal/testenv"
)

// TestMain lets the test binary be a worker process of a --procs session
// that TestBenchProcs starts, as the dagflow binary is in production.
func TestMain(m *testing.M) {
	if os.Getenv(bench.ChildEnv) != "" {
		os.Exit(run(context.Background(), []string{"bench"}, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBenchProcs: --procs 2 runs every step in two worker processes of
// the binary and counts them all; CPU per step is reported for the
// engines and the servers apart.
func TestBenchProcs(t *testing.T) {
	redisAddr := testenv.RequireRedis(t)
	testenv.MySQLDatabase(t) // fails or skips when MySQL does not answer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	args := []string{"bench", "--procs", "2", "--queues", "2", "--runs", "200", "--warmup", "20", "--workers", "16",
		"--mysql-dsn", testenv.MySQLDSN(), "--redis-addr", redisAddr}
	if code := run(ctx, args, &out, &errb); code != 0 {
		t.Fatalf("dagflow bench --procs 2 exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	var res struct {
		Procs       int       `json:"procs"`
		Queues      int       `json:"queues"`
		StepsPerS   float64   `json:"steps_per_s"`
		StepsByProc []int64   `json:"steps_by_proc"`
		EngineCPU   float64   `json:"engine_cpu_s_per_1000_steps"`
		RedisCPU    *float64  `json:"redis_cpu_s_per_1000_steps"`
		RedisCPUs   []float64 `json:"redis_servers_cpu_s"`
		Errors      int64     `json:"errors"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &res); err != nil {
		t.Fatalf("bench --procs printed %q: %v", out.String(), err)
	}
	var sum int64
	for _, n := range res.StepsByProc {
		sum += n
	}
	if res.Procs != 2 || res.Queues != 2 || len(res.StepsByProc) != 2 || sum != 800 || res.StepsPerS <= 0 || res.Errors != 0 {
		t.Errorf("bench --procs 2 --queues 2: %+v, want 800 steps over 2 processes, no errors", res)
	}
	if res.EngineCPU <= 0 || res.RedisCPU == nil || len(res.RedisCPUs) != 1 {
		t.Errorf("bench --procs: engine CPU %v, Redis CPU %v (%v): want both measured", res.EngineCPU, res.RedisCPU, res.RedisCPUs)
	}
}

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
		{[]string{"--queues", "3"}, "-queues and -redis-cluster need -procs"},
		{[]string{"--procs", "2", "--rate", "10"}, "-procs measures full-load throughput only"},
		{[]string{"--procs", "-1"}, "-procs -1"},
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
