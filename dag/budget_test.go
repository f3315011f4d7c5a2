package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
)

// hostileWhen walks a list once for every element of it: quadratic in
// the input, minutes of CPU on a few hundred kilobytes.
const hostileWhen = "all(input.a, all(input.a, # > 0))"

// hostileInput is a run input of about size bytes: {"a":[1,1,...]}.
func hostileInput(size int) json.RawMessage {
	n := size / 2
	return json.RawMessage(`{"a":[` + strings.Repeat("1,", n-1) + `1]}`)
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestEvalWhenStopsAtDeadline(t *testing.T) {
	w, err := dag.New("w").Step("s", noop, dag.When(hostileWhen)).Build()
	if err != nil {
		t.Fatal(err)
	}
	in := hostileInput(300 << 10)
	// Decoding the input is linear and not interruptible: allow for it
	// (a second or more with the race detector on a busy machine).
	start := time.Now()
	var v any
	if err := json.Unmarshal(in, &v); err != nil {
		t.Fatal(err)
	}
	decode := time.Since(start)
	const budget = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start = time.Now()
	got, err := w.Step("s").EvalWhen(ctx, in, nil)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("EvalWhen() = %v, nil after %v; want a deadline error", got, took)
	}
	if !errors.Is(err, dag.ErrEvalCondition) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("EvalWhen() error = %v; want it to wrap ErrEvalCondition and context.DeadlineExceeded", err)
	}
	want := `dag: workflow "w": step "s": when "` + hostileWhen + `": when condition failed: stopped: context deadline exceeded`
	if err.Error() != want {
		t.Errorf("EvalWhen() error =\n%s\nwant\n%s", err, want)
	}
	// Slack for the race detector and a loaded machine: the evaluation
	// checks its budget at every iteration, so it ends within one.
	if took > budget+2*decode+time.Second {
		t.Errorf("EvalWhen() returned after %v, budget %v (decoding the input took %v)", took, budget, decode)
	}
	// It returned, so nothing evaluates any more: the process is idle.
	before := cpuTime(t)
	time.Sleep(300 * time.Millisecond)
	if used := cpuTime(t) - before; used > 150*time.Millisecond {
		t.Errorf("the process used %v of CPU in the 300ms after EvalWhen returned; the evaluation kept running", used)
	}
}

func TestEvalWhenCancelled(t *testing.T) {
	w, err := dag.New("w").Step("s", noop, dag.When(hostileWhen)).Build()
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("lease lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	_, err = w.Step("s").EvalWhen(ctx, hostileInput(100<<10), nil)
	if !errors.Is(err, cause) || !errors.Is(err, dag.ErrEvalCondition) {
		t.Fatalf("EvalWhen() error = %v; want it to wrap the cancellation cause and ErrEvalCondition", err)
	}

	// A context that ended before the evaluation stops it before it starts.
	_, err = w.Step("s").EvalWhen(ctx, json.RawMessage(`{"a":[1]}`), nil)
	if !errors.Is(err, cause) {
		t.Fatalf("EvalWhen() on an ended context = %v; want the cause", err)
	}
}

// TestEvalWhenBudgetEveryLoop runs every kind of loop a condition can
// make (each builtin that takes a predicate) under a short deadline with a
// quadratic body: each must stop.
func TestEvalWhenBudgetEveryLoop(t *testing.T) {
	// Quadratic whatever the optimizer does: count cannot stop early.
	inner := "count(input.a, # > 0) == len(input.a)"
	conds := []string{
		"any(input.a, !(" + inner + "))",
		"none(input.a, !(" + inner + "))",
		"one(input.a, " + inner + ")",
		"len(filter(input.a, !(" + inner + "))) == 0",
		"sum(filter(input.a, " + inner + ")) > 0",
		"len(map(input.a, " + inner + ")) > 0",
		"find(input.a, !(" + inner + ")) == nil",
		"findIndex(input.a, !(" + inner + ")) >= 0",
		"findLast(input.a, !(" + inner + ")) == nil",
		"findLastIndex(input.a, !(" + inner + ")) >= 0",
		"sum(input.a, len(filter(input.a, # > 0))) > 0",
		"reduce(input.a, #acc + count(input.a, # > 0), 0) > 0",
		"len(groupBy(input.a, " + inner + ")) > 0",
		"len(sortBy(input.a, count(input.a, # > 0))) > 0",
		"let f = input.a; all(f, " + inner + ")",
		"first(filter(input.a, !(" + inner + "))) == nil",
		"all(input.a, " + inner + ") && all(input.a, " + inner + ")",
		"sum(map(filter(input.a, " + inner + "), count(input.a, # > 0))) > 0",
	}
	// 20,000 elements: decoding takes milliseconds, every loop below
	// minutes.
	in := hostileInput(40 << 10)
	for _, c := range conds {
		t.Run(c, func(t *testing.T) {
			w, err := dag.New("w").Step("s", noop, dag.When(c)).Build()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err = w.Step("s").EvalWhen(ctx, in, nil)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("EvalWhen() returned after %v", took)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("EvalWhen() error = %v; want a deadline error", err)
			}
		})
	}
}

func TestWhenTooLarge(t *testing.T) {
	src := strings.Repeat("input.n + ", dag.MaxWhenNodes) + "1 > 0"
	_, err := dag.New("w").Step("s", noop, dag.When(src)).Build()
	if !errors.Is(err, dag.ErrBadCondition) {
		t.Fatalf("Build() error = %v; want ErrBadCondition", err)
	}
	if want := "exceeds maximum allowed nodes"; !strings.Contains(err.Error(), want) {
		t.Errorf("Build() error = %.300v; want it to say %q", err, want)
	}
	if _, err := dag.New("w").Step("s", noop, dag.When(strings.Repeat("input.n + ", dag.MaxWhenNodes/8)+"1 > 0")).Build(); err != nil {
		t.Errorf("Build() of a condition under the limit: %v", err)
	}
}

func TestStepReads(t *testing.T) {
	w, err := dag.New("w").
		Step("a", noop).Step("b", noop).
		Step("c", noop, dag.After("a", "b")).
		Step("plain", noop, dag.After("c")).
		Step("named", noop, dag.After("c"), dag.When(`steps.b.output.ok && steps.c.output != nil`)).
		Step("dynamic", noop, dag.After("c"), dag.When(`steps[input.k].output != nil`)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	for step, want := range map[string][]string{
		"a":       nil,
		"plain":   {"c"},
		"named":   {"c", "b"},
		"dynamic": {"c", "a", "b"},
	} {
		if diff := cmp.Diff(want, w.Step(step).Reads()); diff != "" {
			t.Errorf("%s.Reads() (-want +got):\n%s", step, diff)
		}
	}
}
