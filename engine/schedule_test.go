package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
)

// cluster is what the nodes of one test share: store, Redis and prefix.
type cluster struct {
	store  persistence.Store
	redis  redis.UniversalClient
	prefix string
}

func sqliteCluster(t *testing.T) cluster {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "dagflow.db"), AutoMigrate: true})
	if err != nil {
		t.Fatalf("sqlite: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatalf("miniredis: %v", err)
	}
	t.Cleanup(m.Close)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return cluster{store: st, redis: c, prefix: "sched"}
}

func mysqlCluster(t *testing.T) cluster {
	t.Helper()
	o := mysqlBackend(t)
	return cluster{store: o.Store, redis: o.Redis, prefix: o.Prefix}
}

// eachCluster runs f on the embedded backends and on MariaDB + Redis.
func eachCluster(t *testing.T, f func(t *testing.T, c cluster)) {
	t.Run("sqlite+miniredis", func(t *testing.T) { f(t, sqliteCluster(t)) })
	t.Run("mysql+redis", func(t *testing.T) { f(t, mysqlCluster(t)) })
}

type nodeConfig struct {
	clock     engine.Clock
	interval  time.Duration // ScheduleInterval; negative: passes only through FireSchedules
	noWorkers bool
	workflows []*dag.Workflow
	declare   func(e *engine.Engine) error
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// startNode starts one engine node of the cluster; it is stopped when the
// test ends (or earlier, by the test).
func startNode(t *testing.T, c cluster, nc nodeConfig) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{
		Store:             c.store,
		Redis:             c.redis,
		Prefix:            c.prefix,
		Clock:             nc.clock,
		Logger:            slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Concurrency:       4,
		NoWorkers:         nc.noWorkers,
		PollInterval:      10 * time.Millisecond,
		ReconcileInterval: 200 * time.Millisecond,
		Lease:             10 * time.Second,
		ScheduleInterval:  nc.interval,
		MaxClockSkew:      -1, // the nodes' fake clocks are far from the database's
	})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	if err := e.Register(nc.workflows...); err != nil {
		t.Fatalf("register: %v", err)
	}
	if nc.declare != nil {
		if err := nc.declare(e); err != nil {
			t.Fatalf("declare: %v", err)
		}
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { stopNode(t, e) })
	return e
}

func stopNode(t *testing.T, e *engine.Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// quickWorkflow is one step that succeeds at once.
func quickWorkflow(t *testing.T, name string) *dag.Workflow {
	t.Helper()
	wf, err := dag.New(name).Step("work", steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// slowWorkflow is one step that waits until release is closed.
func slowWorkflow(t *testing.T, name string, release <-chan struct{}) *dag.Workflow {
	t.Helper()
	wf, err := dag.New(name).Step("wait", steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		select {
		case <-release:
			return json.RawMessage(`{}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// scheduleRuns returns every run of a schedule, oldest first.
func scheduleRuns(t *testing.T, st persistence.Store, name string) []persistence.Run {
	t.Helper()
	var out []persistence.Run
	p := persistence.RunListParams{Schedule: name, Limit: 1000}
	for {
		page, err := st.RunList(context.Background(), p)
		if err != nil {
			t.Fatalf("run list: %v", err)
		}
		out = append(out, page.Runs...)
		if page.NextCursor == "" {
			break
		}
		p.Cursor = page.NextCursor
	}
	slices.Reverse(out)
	return out
}

// runTicks returns the ticks of runs, checking each was started by the
// schedule with its tick's key.
func runTicks(t *testing.T, name string, runs []persistence.Run) []time.Time {
	t.Helper()
	var ticks []time.Time
	for _, r := range runs {
		if r.ScheduledTick == nil {
			t.Fatalf("run %s has no tick", r.ID)
		}
		if want := cron.Key(name, *r.ScheduledTick); r.IdempotencyKey != want {
			t.Errorf("run %s: key %q, want %q", r.ID, r.IdempotencyKey, want)
		}
		ticks = append(ticks, r.ScheduledTick.UTC())
	}
	return ticks
}

func history(t *testing.T, e *engine.Engine, name string) map[string][]time.Time {
	t.Helper()
	rows, err := e.ScheduleHistory(context.Background(), name, 1000)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	out := map[string][]time.Time{}
	for i := len(rows) - 1; i >= 0; i-- {
		out[rows[i].Outcome] = append(out[rows[i].Outcome], rows[i].Tick.UTC())
	}
	return out
}

func seconds(t0 time.Time, from, to int) []time.Time {
	var out []time.Time
	for i := from; i <= to; i++ {
		out = append(out, t0.Add(time.Duration(i)*time.Second))
	}
	return out
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Three nodes fire a one-second schedule for 120 simulated seconds; one
// stops halfway. Every tick gets exactly one run.
func TestScheduleThreeNodesOncePerTick(t *testing.T) {
	c := mysqlCluster(t)
	clock := enginetest.NewFakeClock(t0)
	wf := quickWorkflow(t, "tick")
	var nodes []*engine.Engine
	for range 3 {
		nodes = append(nodes, startNode(t, c, nodeConfig{
			clock: clock, interval: 5 * time.Millisecond, noWorkers: true, workflows: []*dag.Workflow{wf},
			declare: func(e *engine.Engine) error {
				return e.Schedule("every-second", "* * * * * *", "tick", map[string]int{"n": 1}, engine.CatchUp(cron.CatchUpNone, 0))
			},
		}))
	}
	ctx := context.Background()
	for i := 1; i <= 120; i++ {
		if i == 61 {
			stopNode(t, nodes[2])
		}
		clock.Advance(time.Second)
		want := t0.Add(time.Duration(i) * time.Second)
		testenv.Eventually(t, 10*time.Second, func() bool {
			sc, err := c.store.ScheduleGet(ctx, "every-second")
			return err == nil && sc.LastTick != nil && !sc.LastTick.Before(want)
		}, "tick %d handled", i)
	}
	for _, n := range nodes[:2] {
		stopNode(t, n)
	}
	got := runTicks(t, "every-second", scheduleRuns(t, c.store, "every-second"))
	if want := seconds(t0, 1, 120); !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("got %d runs for ticks %v..., want exactly one per tick 1..120", len(got), got[:min(5, len(got))])
	}
	h := history(t, nodes[0], "every-second")
	if len(h[persistence.TickFired]) != 120 || len(h[persistence.TickSkipped]) != 0 {
		t.Errorf("history: %d fired, %d skipped; want 120 and 0", len(h[persistence.TickFired]), len(h[persistence.TickSkipped]))
	}
}

// All nodes down for ten minutes of a per-minute schedule: latest starts
// one catch-up run, all ten, none zero.
func TestScheduleCatchUpAfterDowntime(t *testing.T) {
	eachCluster(t, func(t *testing.T, c cluster) {
		clock := enginetest.NewFakeClock(t0)
		wf := quickWorkflow(t, "minutely")
		policies := []cron.CatchUp{cron.CatchUpNone, cron.CatchUpLatest, cron.CatchUpAll}
		declare := func(e *engine.Engine) error {
			for _, p := range policies {
				if err := e.Schedule("catch-up-"+string(p), "* * * * *", "minutely", nil, engine.CatchUp(p, time.Hour)); err != nil {
					return err
				}
			}
			return nil
		}
		ctx := context.Background()
		first := startNode(t, c, nodeConfig{clock: clock, interval: -1, noWorkers: true, workflows: []*dag.Workflow{wf}, declare: declare})
		clock.Set(t0.Add(time.Minute + time.Second))
		if res, err := first.FireSchedules(ctx); err != nil || res.Fired != 3 {
			t.Fatalf("first pass: %+v, %v; want 3 fired", res, err)
		}
		stopNode(t, first)
		// Down from 00:01:01 to 00:11:30: ticks 00:02..00:11 are missed.
		clock.Set(t0.Add(11*time.Minute + 30*time.Second))
		second := startNode(t, c, nodeConfig{clock: clock, interval: -1, noWorkers: true, workflows: []*dag.Workflow{wf}, declare: declare})
		if _, err := second.FireSchedules(ctx); err != nil {
			t.Fatalf("pass after downtime: %v", err)
		}
		if _, err := second.FireSchedules(ctx); err != nil { // a repeat changes nothing
			t.Fatalf("second pass: %v", err)
		}
		minute := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
		want := map[cron.CatchUp][]time.Time{
			cron.CatchUpNone:   {minute(1)},
			cron.CatchUpLatest: {minute(1), minute(11)},
			cron.CatchUpAll:    {minute(1), minute(2), minute(3), minute(4), minute(5), minute(6), minute(7), minute(8), minute(9), minute(10), minute(11)},
		}
		for _, p := range policies {
			name := "catch-up-" + string(p)
			got := runTicks(t, name, scheduleRuns(t, c.store, name))
			if !slices.EqualFunc(got, want[p], time.Time.Equal) {
				t.Errorf("%s: runs for ticks %v, want %v", p, got, want[p])
			}
		}
		h := history(t, second, "catch-up-none")
		if !slices.EqualFunc(h[persistence.TickSkipped], []time.Time{minute(11)}, time.Time.Equal) {
			t.Errorf("none: skipped history %v, want one row at the last missed tick", h[persistence.TickSkipped])
		}
	})
}

// A slow run: with skip the ticks it spans start nothing and are recorded
// as skipped; with buffer_one the first of them runs after it.
func TestScheduleOverlapWithSlowRun(t *testing.T) {
	eachCluster(t, func(t *testing.T, c cluster) {
		clock := enginetest.NewFakeClock(t0)
		release := make(chan struct{})
		wf := slowWorkflow(t, "slow", release)
		e := startNode(t, c, nodeConfig{clock: clock, interval: -1, workflows: []*dag.Workflow{wf},
			declare: func(e *engine.Engine) error {
				if err := e.Schedule("skip", "* * * * * *", "slow", nil, engine.Overlap(cron.OverlapSkip)); err != nil {
					return err
				}
				return e.Schedule("buffer", "* * * * * *", "slow", nil, engine.Overlap(cron.OverlapBufferOne))
			}})
		ctx := context.Background()
		pass := func() cron.PassResult {
			t.Helper()
			res, err := e.FireSchedules(ctx)
			if err != nil {
				t.Fatalf("pass: %v", err)
			}
			return res
		}
		clock.Set(t0.Add(time.Second))
		if res := pass(); res.Fired != 2 {
			t.Fatalf("first tick: %+v, want 2 fired", res)
		}
		for range 4 { // ticks 2..5 while both runs wait
			clock.Advance(time.Second)
			pass()
		}
		close(release)
		for _, name := range []string{"skip", "buffer"} {
			for _, r := range scheduleRuns(t, c.store, name) {
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				if _, err := e.Wait(wctx, r.ID); err != nil {
					t.Fatalf("wait %s: %v", r.ID, err)
				}
				cancel()
			}
		}
		pass() // the buffered tick starts now
		for _, r := range scheduleRuns(t, c.store, "buffer") {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			if _, err := e.Wait(wctx, r.ID); err != nil {
				t.Fatalf("wait %s: %v", r.ID, err)
			}
			cancel()
		}
		pass() // and only once
		if got := runTicks(t, "skip", scheduleRuns(t, c.store, "skip")); !slices.EqualFunc(got, seconds(t0, 1, 1), time.Time.Equal) {
			t.Errorf("skip: runs for ticks %v, want only tick 1", got)
		}
		if got := runTicks(t, "buffer", scheduleRuns(t, c.store, "buffer")); !slices.EqualFunc(got, seconds(t0, 1, 2), time.Time.Equal) {
			t.Errorf("buffer_one: runs for ticks %v, want ticks 1 and 2", got)
		}
		if h := history(t, e, "skip"); !slices.EqualFunc(h[persistence.TickSkipped], seconds(t0, 2, 5), time.Time.Equal) {
			t.Errorf("skip: skipped history %v, want ticks 2..5", h[persistence.TickSkipped])
		}
		h := history(t, e, "buffer")
		if !slices.EqualFunc(h[persistence.TickBuffered], seconds(t0, 2, 2), time.Time.Equal) ||
			!slices.EqualFunc(h[persistence.TickSkipped], seconds(t0, 3, 5), time.Time.Equal) {
			t.Errorf("buffer_one: history %v, want tick 2 buffered and 3..5 skipped", h)
		}
	})
}

// Real time: an @every 1s schedule on two nodes for 5 seconds.
func TestScheduleRealTimeTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 5 seconds")
	}
	c := mysqlCluster(t)
	wf := quickWorkflow(t, "heartbeat")
	var nodes []*engine.Engine
	for range 2 {
		nodes = append(nodes, startNode(t, c, nodeConfig{
			clock: engine.SystemClock, interval: 50 * time.Millisecond, noWorkers: true, workflows: []*dag.Workflow{wf},
			declare: func(e *engine.Engine) error { return e.Schedule("every-1s", "@every 1s", "heartbeat", nil) },
		}))
	}
	time.Sleep(5 * time.Second) // the test is about real time passing
	for _, n := range nodes {
		stopNode(t, n)
	}
	runs := scheduleRuns(t, c.store, "every-1s")
	ticks := runTicks(t, "every-1s", runs)
	if len(runs) < 4 || len(runs) > 6 {
		t.Errorf("got %d runs in 5s, want 4 to 6 (ticks %v)", len(runs), ticks)
	}
	seen := map[int64]bool{}
	for _, tk := range ticks {
		if seen[tk.Unix()] {
			t.Errorf("two runs for tick %v", tk)
		}
		seen[tk.Unix()] = true
	}
}

func TestScheduleAPI(t *testing.T) {
	c := sqliteCluster(t)
	clock := enginetest.NewFakeClock(t0)
	wf := quickWorkflow(t, "report")
	e := startNode(t, c, nodeConfig{clock: clock, interval: -1, noWorkers: true, workflows: []*dag.Workflow{wf},
		declare: func(e *engine.Engine) error {
			if err := e.Schedule("hourly-report", "0 * * * *", "report", map[string]string{"kind": "hourly"},
				engine.TimeZone("Europe/Berlin"), engine.Overlap(cron.OverlapSkip), engine.CatchUp(cron.CatchUpNone, 0)); err != nil {
				return err
			}
			return e.Schedule("old", "@daily", "report", nil)
		}})
	ctx := context.Background()

	list, err := e.Schedules(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("Schedules: %v, %v", list, err)
	}
	hr := list[0]
	if hr.Name != "hourly-report" || hr.TimeZone != "Europe/Berlin" || hr.Overlap != "skip" || hr.CatchUp != "none" || string(hr.Input) != `{"kind":"hourly"}` {
		t.Errorf("stored schedule %+v", hr.Schedule)
	}
	if len(hr.Next) != 5 || !hr.Next[0].Equal(t0.Add(time.Hour)) || hr.Next[0].Location().String() != "Europe/Berlin" {
		t.Errorf("next fire times %v, want 5 from 01:00 UTC in Europe/Berlin", hr.Next)
	}

	// Paused: ticks pass without runs, and resuming does not fire them.
	if err := e.PauseSchedule(ctx, "hourly-report"); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(3*time.Hour + time.Second))
	if res, err := e.FireSchedules(ctx); err != nil || res.Fired != 0 {
		t.Fatalf("paused pass: %+v, %v", res, err)
	}
	if info, _ := e.GetSchedule(ctx, "hourly-report"); !info.Paused || len(info.Next) != 0 {
		t.Errorf("paused schedule: paused %v, next %v", info.Paused, info.Next)
	}
	if err := e.ResumeSchedule(ctx, "hourly-report"); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(3*time.Hour + 30*time.Minute))
	if res, err := e.FireSchedules(ctx); err != nil || res.Fired != 0 || res.Missed != 0 {
		t.Fatalf("pass after resume: %+v, %v; want nothing", res, err)
	}
	clock.Set(t0.Add(4*time.Hour + time.Second))
	if res, err := e.FireSchedules(ctx); err != nil || res.Fired != 1 {
		t.Fatalf("next tick after resume: %+v, %v; want 1 fired", res, err)
	}

	// Trigger now.
	id, err := e.TriggerSchedule(ctx, "hourly-report")
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.store.RunGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if run.Schedule != "hourly-report" || !strings.HasPrefix(run.IdempotencyKey, "schedule:hourly-report:manual:") || string(run.Input) != `{"kind":"hourly"}` {
		t.Errorf("triggered run: schedule %q key %q input %s", run.Schedule, run.IdempotencyKey, run.Input)
	}
	if _, err := e.TriggerSchedule(ctx, "nope"); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("trigger unknown: %v", err)
	}
	if err := e.Schedule("late", "@daily", "report", nil); !errors.Is(err, engine.ErrAlreadyStarted) {
		t.Errorf("Schedule after Start: %v", err)
	}

	// A node that does not declare "old" (an older or newer deploy's)
	// leaves it enabled; only an explicit action disables it.
	stopNode(t, e)
	e2 := startNode(t, c, nodeConfig{clock: clock, interval: -1, noWorkers: true, workflows: []*dag.Workflow{wf},
		declare: func(e *engine.Engine) error { return e.Schedule("hourly-report", "0 * * * *", "report", nil) }})
	old, err := e2.GetSchedule(ctx, "old")
	if err != nil || old.Disabled {
		t.Errorf("undeclared schedule: %+v, %v; want it left enabled", old.Schedule, err)
	}
	if err := e2.DisableSchedule(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if old, err := e2.GetSchedule(ctx, "old"); err != nil || !old.Disabled {
		t.Errorf("disabled schedule: %+v, %v; want disabled", old.Schedule, err)
	}
	if _, err := e2.TriggerSchedule(ctx, "old"); !errors.Is(err, cron.ErrDisabled) {
		t.Errorf("trigger disabled: %v", err)
	}
	// A node that declares nothing leaves them alone.
	stopNode(t, e2)
	e3 := startNode(t, c, nodeConfig{clock: clock, interval: -1, noWorkers: true, workflows: []*dag.Workflow{wf}})
	if hr, err := e3.GetSchedule(ctx, "hourly-report"); err != nil || hr.Disabled {
		t.Errorf("declared schedule after a node with none: %+v, %v", hr.Schedule, err)
	}
}

func TestScheduleDeclarationErrors(t *testing.T) {
	c := sqliteCluster(t)
	e, err := engine.New(engine.Config{Store: c.store, Redis: c.redis, Prefix: c.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer stopNode(t, e)
	err = e.Schedule("nightly", "0 25 * * *", "settlement", nil)
	var se *cron.SpecError
	if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), `cron: schedule "nightly": invalid spec "0 25 * * *": `) {
		t.Errorf("invalid spec: %v", err)
	}
	if err := e.Schedule("nightly", "0 2 * * *", "settlement", nil, engine.TimeZone("Nowhere/City")); !errors.Is(err, cron.ErrInvalidTimeZone) {
		t.Errorf("invalid zone: %v", err)
	}
	if err := e.Schedule("nightly", "0 2 * * *", "settlement", nil, engine.Overlap("sometimes")); err == nil {
		t.Error("unknown overlap policy: no error")
	}
	if err := e.Schedule("nightly", "0 2 * * *", "settlement", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Schedule("nightly", "0 3 * * *", "settlement", nil); !errors.Is(err, engine.ErrDuplicateSchedule) {
		t.Errorf("duplicate: %v", err)
	}
}

func TestLoadSchedules(t *testing.T) {
	c := sqliteCluster(t)
	clock := enginetest.NewFakeClock(t0)
	fsys := fstest.MapFS{
		"nightly.yaml": {Data: []byte(`schedules:
  - name: nightly-settlement
    spec: "0 2 * * *"
    workflow: &wf settlement
    time_zone: Europe/Berlin
    input: {region: eu, days: [1, 2]}
    overlap: buffer_one
    catch_up: all
    catch_up_window: 6h
  - name: stock-sync
    spec: "@every 10m"
    workflow: *wf
`)},
	}
	wf := quickWorkflow(t, "settlement")
	e := startNode(t, c, nodeConfig{clock: clock, interval: -1, noWorkers: true, workflows: []*dag.Workflow{wf},
		declare: func(e *engine.Engine) error { return e.LoadSchedules(fsys) }})
	list, err := e.Schedules(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("Schedules: %v, %v", list, err)
	}
	ns := list[0].Schedule
	if ns.Name != "nightly-settlement" || ns.TimeZone != "Europe/Berlin" || ns.Overlap != "buffer_one" || ns.CatchUp != "all" ||
		ns.CatchUpWindow != 6*time.Hour || string(ns.Input) != `{"days":[1,2],"region":"eu"}` {
		t.Errorf("nightly-settlement stored as %+v", ns)
	}
	if list[1].Name != "stock-sync" || list[1].CatchUp != "latest" || list[1].Overlap != "allow" {
		t.Errorf("stock-sync stored as %+v", list[1].Schedule)
	}

	bad := []struct {
		yaml string
		want string
	}{
		// The files are parsed by package cron, whose errors say so.
		{"schedules:\n  - name: x\n    spec: \"@daily\"\n    workflow: w\n    cron: \"@daily\"\n", "cron: bad.yaml:5:5: schedules[0].cron: unknown field"},
		{"schedules:\n  - name: x\n    workflow: w\n", "cron: bad.yaml:2:5: schedules[0].spec: missing field"},
		{"schedules:\n  - name: x\n    spec: \"0 25 * * *\"\n    workflow: w\n", `cron: bad.yaml:3:11: schedules[0].spec: schedule "x": invalid spec "0 25 * * *"`},
		{"schedules:\n  - name: x\n    spec: \"@daily\"\n    workflow: w\n    catch_up: sometimes\n", `cron: bad.yaml:5:15: schedules[0].catch_up: unknown catch-up policy "sometimes"`},
		{"workflows: []\n", "cron: bad.yaml:1:1: workflows: unknown field"},
	}
	for _, b := range bad {
		e, err := engine.New(engine.Config{Store: c.store, Redis: c.redis, Prefix: c.prefix})
		if err != nil {
			t.Fatal(err)
		}
		err = e.LoadSchedules(fstest.MapFS{"bad.yaml": {Data: []byte(b.yaml)}})
		var ye *dag.YAMLError
		if err == nil || !errors.As(err, &ye) || !strings.HasPrefix(err.Error(), b.want) {
			t.Errorf("LoadSchedules(%q):\n got %v\nwant prefix %q", b.yaml, err, b.want)
		}
		stopNode(t, e)
	}

	// A file's schedule that clashes with one declared in Go is refused
	// by the engine, like a second Schedule call.
	e2, err := engine.New(engine.Config{Store: c.store, Redis: c.redis, Prefix: c.prefix})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Schedule("stock-sync", "@hourly", "settlement", nil); err != nil {
		t.Fatal(err)
	}
	if err := e2.LoadSchedules(fsys); !errors.Is(err, engine.ErrDuplicateSchedule) {
		t.Errorf("LoadSchedules after Schedule of the same name: %v, want ErrDuplicateSchedule", err)
	}
	stopNode(t, e2)
}
