package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/deploy"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// metricModes are the order demo's kinds of run: a success, a success
// after a retry, a compensated run, a failed run with nothing to undo,
// and a run failed because a compensation dead-lettered.
var metricModes = []string{"ok", "retry", "compensate", "fail", "compfail"}

// metricsFail steers the order workflow by the run's input mode.
func metricsFail(sc steps.Context) error {
	var in struct{ Mode string }
	if err := json.Unmarshal(sc.Input, &in); err != nil {
		return steps.Permanent(err)
	}
	switch {
	case in.Mode == "retry" && sc.Step == "notify" && !sc.Compensation && sc.Attempt == 1:
		return errors.New("mail server busy")
	case in.Mode == "compensate" && sc.Step == "ship" && !sc.Compensation,
		in.Mode == "compfail" && sc.Step == "ship" && !sc.Compensation:
		return steps.Permanent(errors.New("no carrier"))
	case in.Mode == "compfail" && sc.Step == "points" && sc.Compensation:
		return steps.Permanent(errors.New("points ledger closed"))
	case in.Mode == "fail" && sc.Step == "reserve" && !sc.Compensation:
		return steps.Permanent(errors.New("no stock"))
	}
	return nil
}

// scrape fetches /metrics of reg over HTTP, as Prometheus does, and
// parses it into series: "name{k=v,...}" (labels sorted) -> value; a
// histogram gives its _count and _sum.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := func(suffix string) string {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				sort.Strings(ls)
				return mf.GetName() + suffix + "{" + strings.Join(ls, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key("_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key("_sum")] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// storeTruth is what the metrics should say after the demo, from the
// store.
func storeTruth(t *testing.T, env *enginetest.Env, ids []string) map[string]float64 {
	t.Helper()
	ctx := context.Background()
	want := map[string]float64{
		"dagflow_runs_started_total{workflow=order}": float64(len(ids)),

		"dagflow_stale_completions_total{}":               0,
		"dagflow_store_errors_total{}":                    0,
		"dagflow_redis_errors_total{}":                    0,
		"dagflow_queue_depth{queue=default}":              0,
		"dagflow_queue_oldest_age_seconds{queue=default}": 0,
		"dagflow_worker_slots{state=busy}":                0,
		"dagflow_worker_slots{state=free}":                8,
	}
	add := func(k string, n float64) { want[k] += n }
	for _, st := range []string{"succeeded", "failed", "compensated", "cancelled"} {
		add("dagflow_runs_finished_total{status="+st+",workflow=order}", 0)
		add("dagflow_run_duration_seconds_count{status="+st+",workflow=order}", 0)
	}
	for _, st := range []string{"compensated", "failed"} {
		add("dagflow_compensations_total{status="+st+",workflow=order}", 0)
	}
	for _, s := range []string{"reserve", "notify", "points", "ship"} {
		for _, st := range []string{"succeeded", "skipped", "dead", "cancelled"} {
			add("dagflow_steps_finished_total{status="+st+",step="+s+",workflow=order}", 0)
		}
		add("dagflow_step_duration_seconds_count{step="+s+",workflow=order}", 0)
		add("dagflow_step_retries_total{step="+s+",workflow=order}", 0)
	}
	add("dagflow_step_dispatch_seconds_count{queue=default}", 0)
	for _, id := range ids {
		info := mustGet(t, env.Engine, id)
		add("dagflow_runs_finished_total{status="+string(info.Run.Status)+",workflow=order}", 1)
		add("dagflow_run_duration_seconds_count{status="+string(info.Run.Status)+",workflow=order}", 1)
		for _, s := range info.Steps {
			switch s.Status {
			case persistence.StepCompensated:
				add("dagflow_compensations_total{status=compensated,workflow=order}", 1)
			case persistence.StepCompensationFailed:
				add("dagflow_compensations_total{status=failed,workflow=order}", 1)
			}
			if s.Attempt >= 1 {
				add("dagflow_step_dispatch_seconds_count{queue="+s.Queue+"}", 1)
			}
		}
		for _, a := range info.Attempts {
			if a.Kind != persistence.AttemptForward {
				continue
			}
			add("dagflow_step_duration_seconds_count{step="+a.Step+",workflow=order}", 1)
			status := ""
			switch a.Outcome {
			case persistence.OutcomeSucceeded:
				status = "succeeded"
			case persistence.OutcomeSkipped:
				status = "skipped"
			case persistence.OutcomeFailed:
				if a.Attempt < stepOf(t, info, a.Step).Attempt {
					add("dagflow_step_retries_total{step="+a.Step+",workflow=order}", 1)
				} else {
					status = "dead"
				}
			default:
				t.Fatalf("run %s step %s attempt %d: unexpected outcome %s", id, a.Step, a.Attempt, a.Outcome)
			}
			if status != "" {
				add("dagflow_steps_finished_total{status="+status+",step="+a.Step+",workflow=order}", 1)
			}
		}
	}
	page, err := env.Store.StepListDead(ctx, persistence.StepListDeadParams{Workflow: "order", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want["dagflow_dead_letters{workflow=order}"] = float64(len(page.Steps))
	return want
}

func stepOf(t *testing.T, info engine.RunInfo, step string) persistence.StepRun {
	t.Helper()
	for _, s := range info.Steps {
		if s.Step == step {
			return s
		}
	}
	t.Fatalf("run %s has no step %q", info.Run.ID, step)
	return persistence.StepRun{}
}

// After the order demo the scraped counters and histograms agree with
// the store: runs by status, steps by outcome, retries, compensations,
// dead letters; and no label carries a run id.
func TestMetricsMatchStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		reg := prometheus.NewRegistry()
		o := b.opts(t)
		comp := []dag.StepOption{dag.Compensate(r.handler(0, metricsFail))}
		o.Workflows = []*dag.Workflow{orderWorkflow(t, r, "order", 0, metricsFail, false,
			map[string][]dag.StepOption{"reserve": comp, "notify": comp, "points": comp})}
		o.Configure = func(c *engine.Config) { c.Registerer = reg }
		env := enginetest.New(t, o)
		var ids []string
		for _, mode := range metricModes {
			ids = append(ids, env.Trigger(t, "order", map[string]string{"mode": mode}))
		}
		want := map[persistence.RunStatus]int{}
		for i, id := range ids {
			info := env.Wait(t, id)
			want[info.Run.Status]++
			t.Logf("%s: %s", metricModes[i], info.Run.Status)
		}
		if want[persistence.RunSucceeded] != 2 || want[persistence.RunCompensated] != 1 || want[persistence.RunFailed] != 2 {
			t.Fatalf("demo runs ended %v, want 2 succeeded, 1 compensated, 2 failed", want)
		}
		truth := storeTruth(t, env, ids)
		// The engine counts right after each store write: poll briefly.
		var diffs []string
		for deadline := time.Now().Add(5 * time.Second); ; {
			got := scrape(t, reg)
			diffs = diffs[:0]
			for k, v := range truth {
				if got[k] != v {
					diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", k, got[k], v))
				}
			}
			if len(diffs) == 0 || time.Now().After(deadline) {
				checkCardinality(t, got, ids)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		sort.Strings(diffs)
		for _, d := range diffs {
			t.Error(d)
		}
		retries := 0.0
		for k, v := range truth {
			if strings.HasPrefix(k, "dagflow_step_retries_total{") {
				retries += v
			}
		}
		if retries != 1 || truth["dagflow_dead_letters{workflow=order}"] != 3 {
			t.Errorf("the demo should have made 1 retry and 3 dead letters, store says %v and %v",
				retries, truth["dagflow_dead_letters{workflow=order}"])
		}
	})
}

// allowedLabels are the only label names a dagflow metric may have: all
// of low cardinality.
var allowedLabels = map[string]bool{"workflow": true, "step": true, "queue": true, "status": true, "schedule": true, "reason": true, "state": true}

// nodeInfoLabels are the labels of dagflow_node_info only: one series a
// process, so its node id and version add one series per live process.
var nodeInfoLabels = map[string]bool{"node": true, "version": true}

// checkCardinality fails on a label outside allowedLabels (or, on
// dagflow_node_info, nodeInfoLabels) and on any label value that is a
// run id.
func checkCardinality(t *testing.T, series map[string]float64, runIDs []string) {
	t.Helper()
	for k := range series {
		if !strings.HasPrefix(k, "dagflow_") {
			t.Errorf("metric %s is not named dagflow_*", k)
		}
		labels := k[strings.Index(k, "{")+1 : len(k)-1]
		if labels == "" {
			continue
		}
		for _, l := range strings.Split(labels, ",") {
			name, value, _ := strings.Cut(l, "=")
			info := strings.HasPrefix(k, "dagflow_node_info{") && nodeInfoLabels[name]
			if !allowedLabels[name] && !info {
				t.Errorf("metric %s has label %q, not a low-cardinality one", k, name)
			}
			for _, id := range runIDs {
				if strings.Contains(value, id) {
					t.Errorf("metric %s carries run id %s", k, id)
				}
			}
		}
	}
}

// Without a Registerer nothing is registered anywhere and the engine
// runs as before; a Registerer that already holds dagflow's metrics (a
// second engine on one registry) is refused by New, naming the field.
func TestMetricsNilRegistererAndDuplicate(t *testing.T) {
	r := &recorder{}
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}})
	env.AssertRun(t, env.Wait(t, env.Trigger(t, "order", nil)), persistence.RunSucceeded)
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "dagflow_") {
			t.Errorf("an engine without Registerer registered %s on the default registry", mf.GetName())
		}
	}

	reg := prometheus.NewRegistry()
	cfg := engine.Config{Store: env.Store, Redis: env.Redis, Prefix: env.Prefix, Registerer: reg}
	if _, err := engine.New(cfg); err != nil {
		t.Fatalf("first engine on the registry: %v", err)
	}
	_, err = engine.New(cfg)
	if err == nil || !strings.Contains(err.Error(), "Config.Registerer") {
		t.Fatalf("second engine on one registry: err %v, want one naming Config.Registerer", err)
	}
	// A refused registration leaves nothing behind: the registry holds
	// the first engine's metrics, once.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "dagflow_redis_errors_total", Help: "taken"}))
	if _, err := engine.New(engine.Config{Store: env.Store, Redis: env.Redis, Prefix: env.Prefix, Registerer: other}); err == nil {
		t.Fatal("an engine on a registry holding one of its metric names was made")
	}
	if mfs, err := other.Gather(); err != nil || len(mfs) != 1 {
		t.Errorf("after the refused registration the registry gathers %d families (%v), want only the one it had", len(mfs), err)
	}
}

// A schedule's fired tick sets its lag; ticks dropped by the catch-up
// policy are counted as missed.
func TestMetricsSchedules(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		reg := prometheus.NewRegistry()
		start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := enginetest.NewFakeClock(start)
		wf := orderWorkflow(t, r, "order", 0, nil, false, nil)
		o := b.opts(t)
		o.Clock = clock
		o.Configure = func(c *engine.Config) {
			c.Registerer = reg
			c.ScheduleInterval = -1 // passes by hand
		}
		env := enginetest.New(t, o)
		// Declared on a second, unstarted-before-declaring engine of the
		// same cluster: the test's engine is started already.
		e2reg := prometheus.NewRegistry()
		e2, err := engine.New(engine.Config{Store: env.Store, Redis: env.Redis, Prefix: env.Prefix, Clock: clock,
			ScheduleInterval: -1, ReconcileInterval: -1, MaxClockSkew: -1, Registerer: e2reg, NoWorkers: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := e2.Register(wf); err != nil {
			t.Fatal(err)
		}
		if err := e2.Schedule("nightly", "*/1 * * * *", "order", nil, engine.CatchUp(cron.CatchUpNone, 0)); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := e2.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e2.Stop(context.Background()) })
		// The declaring node's counter exists at 0 from its start.
		if v, ok := scrape(t, e2reg)["dagflow_schedule_missed_total{schedule=nightly}"]; !ok || v != 0 {
			t.Errorf("declaring node's schedule missed at start: %v (present %v), want 0 present", v, ok)
		}
		if err := env.Engine.Register(orderWorkflow(t, r, "order", 0, nil, false, nil)); err != nil {
			t.Fatal(err)
		}
		// Three seconds after the first tick: fired, 3s late.
		clock.Set(start.Add(time.Minute + 3*time.Second))
		if res, err := env.Engine.FireSchedules(ctx); err != nil || res.Fired != 1 {
			t.Fatalf("first pass: %+v, %v; want 1 fired", res, err)
		}
		got := scrape(t, reg)
		if v := got["dagflow_schedule_lag_seconds{schedule=nightly}"]; v != 3 {
			t.Errorf("schedule lag %v, want 3", v)
		}
		// The missed counter is there at 0 before its first miss, so that
		// increase() over the first missed ticks is not 0.
		if v, ok := got["dagflow_schedule_missed_total{schedule=nightly}"]; !ok || v != 0 {
			t.Errorf("schedule missed before any miss: %v (present %v), want 0 present", v, ok)
		}
		// An hour later with catch-up none: the ticks between are missed.
		clock.Set(start.Add(61*time.Minute + 30*time.Second))
		res, err := env.Engine.FireSchedules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Missed == 0 {
			t.Fatalf("second pass missed nothing: %+v", res)
		}
		got = scrape(t, reg)
		if v := got["dagflow_schedule_missed_total{schedule=nightly}"]; v != float64(res.Missed) {
			t.Errorf("schedule missed %v, want %d (the pass's)", v, res.Missed)
		}
	})
}

// A run cancelled before it started counts as finished cancelled, on
// the node that cancelled it.
func TestMetricsCancelledRun(t *testing.T) {
	r := &recorder{}
	reg := prometheus.NewRegistry()
	env := enginetest.New(t, enginetest.Options{
		Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)},
		Configure: func(c *engine.Config) { c.Registerer = reg },
	})
	id := env.Trigger(t, "order", nil, engine.Delay(time.Hour))
	if err := env.Engine.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	env.AssertRun(t, env.Wait(t, id), persistence.RunCancelled)
	got := scrape(t, reg)
	for k, want := range map[string]float64{
		"dagflow_runs_started_total{workflow=order}":                                 1,
		"dagflow_runs_finished_total{status=cancelled,workflow=order}":               1,
		"dagflow_run_duration_seconds_count{status=cancelled,workflow=order}":        1,
		"dagflow_steps_finished_total{status=cancelled,step=reserve,workflow=order}": 0,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

// Every metric the engine exports is in deploy/metrics.txt, with its
// type and labels, so the alert rules and the dashboard (checked against
// that file) see what the engine exports.
func TestMetricsMatchTheOperationsFiles(t *testing.T) {
	known, err := deploy.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]deploy.Metric{}
	for _, m := range known {
		byName[m.Name] = m
	}
	reg := prometheus.NewRegistry()
	r := &recorder{}
	env := enginetest.New(t, enginetest.Options{
		Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)},
		Configure: func(c *engine.Config) { c.Registerer = reg },
	})
	env.AssertRun(t, env.Wait(t, env.Trigger(t, "order", nil)), persistence.RunSucceeded)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "dagflow_") {
			continue
		}
		seen++
		m, ok := byName[name]
		if !ok {
			t.Errorf("%s is exported but not in deploy/metrics.txt", name)
			continue
		}
		if got := strings.ToLower(mf.GetType().String()); got != string(m.Type) {
			t.Errorf("%s is a %s, deploy/metrics.txt says %s", name, got, m.Type)
		}
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, lp := range metric.GetLabel() {
				labels = append(labels, lp.GetName())
			}
			sort.Strings(labels)
			want := append([]string(nil), m.Labels...)
			sort.Strings(want)
			if strings.Join(labels, ",") != strings.Join(want, ",") {
				t.Errorf("%s has labels %v, deploy/metrics.txt says %v", name, labels, want)
				break
			}
		}
	}
	if seen < 10 {
		t.Errorf("only %d dagflow metrics gathered after a run", seen)
	}
}

// dagflow_node_info names the node behind a scraped instance: one series,
// 1, with the engine's node id and its binary's version, so a query joins
// the node id on instance instead of every metric carrying it.
func TestMetricsNodeInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := &recorder{}
	env := enginetest.New(t, enginetest.Options{
		Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)},
		Configure: func(c *engine.Config) { c.Registerer = reg },
	})
	var infos []string
	for k, v := range scrape(t, reg) {
		if strings.HasPrefix(k, "dagflow_node_info{") {
			infos = append(infos, fmt.Sprintf("%s = %v", k, v))
		}
	}
	prefix := "dagflow_node_info{node=" + env.Engine.NodeID() + ",version=dagflow "
	if len(infos) != 1 || !strings.HasPrefix(infos[0], prefix) || !strings.HasSuffix(infos[0], "} = 1") {
		t.Fatalf("dagflow_node_info series: %q, want one: %s...} = 1", infos, prefix)
	}
}
