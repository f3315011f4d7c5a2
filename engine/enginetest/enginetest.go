// Package enginetest is dagflow's public test kit: it runs workflows
// in-process on the embedded backends (miniredis and a SQLite file) or on
// backends you pass, with a fake clock so that retries and backoff are
// deterministic, and helpers to wait for runs and assert step outcomes.
//
//	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{wf}})
//	id := env.Trigger(t, "order", input)
//	info := env.Wait(t, id)
//	env.AssertStep(t, info, "ship", persistence.StepSucceeded)
//
// The fake clock drives the engine's timestamps, retry due times and
// leases; handlers and step timeouts still run in real time. Advance the
// clock (or use RunToEnd) to make a retry due. Advancing it past the lease
// while a handler runs makes its step look abandoned, as a real stall would.
package enginetest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/clocktest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
)

// FakeClock is a clock that moves only when told to: Now returns its
// time, Advance(d) moves it forward by d, Set(t) sets it to t. It is safe
// for concurrent use. (It is the fake clock dagflow's own tests use.)
type FakeClock = clocktest.Clock

// NewFakeClock returns a clock set to t.
func NewFakeClock(t time.Time) *FakeClock { return clocktest.New(t) }

// Options configure an Env. Zero values give the embedded backends and a
// fake clock.
type Options struct {
	// Workflows are registered before the engine starts.
	Workflows []*dag.Workflow
	// Store defaults to a SQLite file in t.TempDir().
	Store persistence.Store
	// Redis defaults to an in-process miniredis.
	Redis redis.UniversalClient
	// Prefix defaults to a per-test Redis key prefix.
	Prefix string
	// Clock defaults to a FakeClock at 2030-01-01T00:00:00Z. Pass
	// engine.SystemClock for real time.
	Clock engine.Clock
	// Configure may adjust the engine's config before New.
	Configure func(*engine.Config)
}

// Env is a started engine on test backends. It stops and cleans up when
// the test ends.
type Env struct {
	Engine *engine.Engine
	Store  persistence.Store
	Redis  redis.UniversalClient
	// Prefix is the engine's Redis key prefix; a second Env with the same
	// Store, Redis and Prefix is another node of the same cluster.
	Prefix string
	// Clock is the fake clock, or nil when Options.Clock was not one.
	Clock *FakeClock
	// Miniredis is the in-process Redis, or nil when Options.Redis was set.
	Miniredis *miniredis.Miniredis
}

// New starts an engine for a test.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	env := &Env{}
	ctx := context.Background()
	if o.Store == nil {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "dagflow.db"), AutoMigrate: true})
		if err != nil {
			t.Fatalf("enginetest: sqlite: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		o.Store = st
	}
	env.Store = o.Store
	if o.Redis == nil {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			t.Fatalf("enginetest: miniredis: %v", err)
		}
		t.Cleanup(m.Close)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { c.Close() })
		env.Miniredis = m
		o.Redis = c
	}
	env.Redis = o.Redis
	if o.Prefix == "" {
		o.Prefix = "dagflow-test-" + time.Now().Format("150405.000000")
	}
	env.Prefix = o.Prefix
	if o.Clock == nil {
		env.Clock = NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		o.Clock = env.Clock
	} else if fc, ok := o.Clock.(*FakeClock); ok {
		env.Clock = fc
	}
	cfg := engine.Config{
		Logger:            slog.New(&testHandler{t: t, level: slog.LevelWarn}),
		Store:             o.Store,
		Redis:             o.Redis,
		Prefix:            o.Prefix,
		Clock:             o.Clock,
		Concurrency:       8,
		PollInterval:      10 * time.Millisecond,
		ReconcileInterval: 100 * time.Millisecond,
		Lease:             10 * time.Second,
		Rand:              func() float64 { return 0.5 },
	}
	if env.Clock != nil {
		// A fake clock is years from the database's: no skew check.
		cfg.MaxClockSkew = -1
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("enginetest: %v", err)
	}
	if err := e.Register(o.Workflows...); err != nil {
		t.Fatalf("enginetest: %v", err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatalf("enginetest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("enginetest: stop: %v", err)
		}
	})
	env.Engine = e
	return env
}

// Trigger starts a run and fails the test on error.
func (env *Env) Trigger(t testing.TB, workflow string, input any, opts ...engine.TriggerOption) string {
	t.Helper()
	id, err := env.Engine.Trigger(context.Background(), workflow, input, opts...)
	if err != nil {
		t.Fatalf("enginetest: trigger %q: %v", workflow, err)
	}
	return id
}

// Wait waits (real time, at most 30s) for a run to finish and returns it
// with its steps and attempts. With a fake clock it advances the clock a
// second at a time while the run has a retry waiting (or a parked step with
// a due time: a sleep, a wait's timeout), so backoff passes without real
// waiting.
func (env *Env) Wait(t testing.TB, runID string) engine.RunInfo {
	t.Helper()
	return env.WaitTimeout(t, runID, 30*time.Second)
}

// WaitTimeout is Wait with a chosen real-time limit.
func (env *Env) WaitTimeout(t testing.TB, runID string, timeout time.Duration) engine.RunInfo {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		info, err := env.Engine.Get(ctx, runID)
		if err != nil {
			t.Fatalf("enginetest: get run %s: %v", runID, err)
		}
		if info.Run.Status.Terminal() {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("enginetest: run %s not finished within %v: status %s, steps %s", runID, timeout, info.Run.Status, describe(info))
		}
		if env.Clock != nil {
			if next, ok := nextRetry(info); ok && next.After(env.Clock.Now()) {
				env.Clock.Set(next)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func nextRetry(info engine.RunInfo) (time.Time, bool) {
	var best time.Time
	found := false
	for _, s := range info.Steps {
		if s.NextAttemptAt == nil {
			continue
		}
		// A retry's due time, a waiting compensation's, and a parked
		// step's (a sleep's wake-up, a wait's timeout).
		if s.Status != persistence.StepRetrying && s.Status != persistence.StepParked &&
			!(s.Status == persistence.StepCompensating && s.LeaseExpiresAt == nil) {
			continue
		}
		if !found || s.NextAttemptAt.Before(best) {
			best, found = *s.NextAttemptAt, true
		}
	}
	return best, found
}

func describe(info engine.RunInfo) string {
	m := map[string]string{}
	for _, s := range info.Steps {
		m[s.Step] = string(s.Status)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// AssertStep fails the test unless the run's step has the given status.
func (env *Env) AssertStep(t testing.TB, info engine.RunInfo, step string, want persistence.StepStatus) {
	t.Helper()
	s, ok := info.Step(step)
	if !ok {
		t.Fatalf("enginetest: run %s has no step %q", info.Run.ID, step)
	}
	if s.Status != want {
		t.Fatalf("enginetest: run %s step %q: got status %s, want %s (error: %s)", info.Run.ID, step, s.Status, want, s.Error)
	}
}

// AssertRun fails the test unless the run has the given status.
func (env *Env) AssertRun(t testing.TB, info engine.RunInfo, want persistence.RunStatus) {
	t.Helper()
	if info.Run.Status != want {
		t.Fatalf("enginetest: run %s: got status %s, want %s (error: %s; steps %s)", info.Run.ID, info.Run.Status, want, info.Run.Error, describe(info))
	}
}

// testHandler sends the engine's logs to t.Log, so they show with the
// test that caused them (and only for failing tests, or with -v).
type testHandler struct {
	t     testing.TB
	level slog.Level
	attrs []slog.Attr
}

func (h *testHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *testHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.t.Log(b.String())
	return nil
}

func (h *testHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &testHandler{t: h.t, level: h.level, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *testHandler) WithGroup(string) slog.Handler { return h }
