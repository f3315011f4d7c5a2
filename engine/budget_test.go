package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// quadratic walks xs once for each of its elements: 400 million steps on
// 20,000 elements, many CPU-seconds.
const quadratic = "len(filter(input.xs, {any(input.xs, {# == -1})}))"

// quadraticInput is {"xs": [0, 1, ..., 19999]}.
func quadraticInput() map[string]any {
	xs := make([]int, 20000)
	for i := range xs {
		xs[i] = i
	}
	return map[string]any{"xs": xs}
}

// okRegistry has one handler, ok, that does nothing.
func okRegistry() *steps.Registry {
	reg := steps.NewRegistry()
	reg.MustRegister("ok", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil }))
	return reg
}

// TestExprBudgetEverySite puts the quadratic expression at every place a
// workflow has an expression the engine evaluates for a step: a `when`,
// an HTTP step's body, a wait's correlate, a sleep's until, a child's
// input and a concurrency key. Each runs over Config.WhenBudget on the
// first attempt and dead-letters the step at once, as a permanent error
// naming the budget, although the step may try five times and would have
// minutes to run.
func TestExprBudgetEverySite(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { requests.Add(1) }))
	t.Cleanup(srv.Close)
	sites := map[string]string{
		"when":      "handler: ok\n    when: " + quadratic + " > 0",
		"body":      "kind: http\n    url: " + srv.URL + "\n    body: '" + quadratic + "'",
		"correlate": "wait_for: {event: paid, correlate: '" + quadratic + "'}",
		"until":     "sleep_until: '" + quadratic + "'",
		"child":     "child: {workflow: leaf, input: '" + quadratic + "'}",
		"limit_key": "handler: ok\n    concurrency: {key: '" + quadratic + "', limit: 1}",
	}
	reg := okRegistry()
	var wfs []*dag.Workflow
	for name, step := range sites {
		src := fmt.Sprintf("name: %s\ndefaults:\n  retry: {max_attempts: 5, initial_backoff: 1ms, max_backoff: 1ms}\n  timeout: 5m\nsteps:\n  - name: s\n    %s\n", name, step)
		wf, err := dag.LoadYAML([]byte(src), name+".yaml", reg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wfs = append(wfs, wf)
	}
	leaf, err := dag.LoadYAML([]byte("name: leaf\nsteps:\n  - name: s\n    handler: ok\n"), "leaf.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	env := enginetest.New(t, enginetest.Options{
		Workflows: append(wfs, leaf),
		Clock:     engine.SystemClock,
		Configure: func(c *engine.Config) {
			c.WhenBudget = 200 * time.Millisecond
			c.MaxClockSkew = -1
		},
	})
	for name := range sites {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			id := env.Trigger(t, name, quadraticInput())
			info := env.WaitTimeout(t, id, 30*time.Second)
			env.AssertStep(t, info, "s", persistence.StepDead)
			var atts []persistence.Attempt
			for _, a := range info.Attempts {
				if a.Step == "s" {
					atts = append(atts, a)
				}
			}
			if len(atts) != 1 {
				t.Fatalf("attempts of s = %+v; want one", atts)
			}
			want := "ran over its time budget of 200ms (Config.WhenBudget)"
			if !strings.Contains(atts[0].Error, want) {
				t.Errorf("attempt error = %q; want it to contain %q", atts[0].Error, want)
			}
			t.Logf("dead %v after the trigger: %s", time.Since(start), atts[0].Error)
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the HTTP step sent %d requests; want none", n)
	}
}

// TestExprBudgetEventFilter publishes an event whose subscription's
// filter runs over the budget: Publish returns within a few budgets and
// starts no run.
func TestExprBudgetEventFilter(t *testing.T) {
	reg := okRegistry()
	src := "name: sub\non:\n  - event: big\n    when: '" + strings.ReplaceAll(quadratic, "input.", "event.") + " > 0'\nsteps:\n  - name: s\n    handler: ok\n"
	wf, err := dag.LoadYAML([]byte(src), "sub.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	env := enginetest.New(t, enginetest.Options{
		Workflows: []*dag.Workflow{wf},
		Clock:     engine.SystemClock,
		Configure: func(c *engine.Config) { c.WhenBudget = 200 * time.Millisecond; c.MaxClockSkew = -1 },
	})
	start := time.Now()
	pub, err := env.Engine.Publish(context.Background(), "big", quadraticInput())
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Publish took %v with a 200ms budget", took)
	}
	if len(pub.Runs) != 0 {
		t.Errorf("Publish started %+v; want no run", pub.Runs)
	}
}

// TestLoggedErrorCapped: a step whose error is megabytes (a handler's
// own, or a remote's echoed in it) is logged, and summed up in the run's
// error, in a line of a few kilobytes that says how long the error was;
// the attempt keeps the store's share of it.
func TestLoggedErrorCapped(t *testing.T) {
	huge := "remote said: " + strings.Repeat("z", 3<<20)
	h := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		return nil, steps.Permanent(errors.New(huge))
	})
	wf, err := dag.New("loud").Step("s", h).Build()
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	env := enginetest.New(t, enginetest.Options{
		Workflows: []*dag.Workflow{wf},
		Configure: func(c *engine.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) },
	})
	info := env.Wait(t, env.Trigger(t, "loud", nil))
	env.AssertStep(t, info, "s", persistence.StepDead)
	// The node logs the dead letter once the store has it.
	testenv.Eventually(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), "step dead-lettered") }, "no dead-letter log line")
	var dead string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "step dead-lettered") {
			dead = line
		}
		if len(line) > 8<<10 {
			t.Errorf("a log line of %d bytes: %.200s...", len(line), line)
		}
	}
	if want := fmt.Sprintf("(%d bytes)", len(huge)); !strings.Contains(dead, "remote said: zzz") || !strings.Contains(dead, want) {
		t.Errorf("dead-letter log line %.300q; want the error's start and %s", dead, want)
	}
	if len(info.Run.Error) > 8<<10 {
		t.Errorf("the run's error is %d bytes; want a short summary", len(info.Run.Error))
	}
}
