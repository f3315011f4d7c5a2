package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// hostileWhen walks the input's list once for every element of it:
// quadratic, half an hour of CPU on 300 KB.
const hostileWhen = "all(input.a, all(input.a, # > 0))"

// hostileInput is a run input of about size bytes: {"a":[1,1,...]}.
func hostileInput(size int) json.RawMessage {
	return json.RawMessage(`{"a":[` + strings.Repeat("1,", size/2-1) + `1]}`)
}

// hostileWorkflow has one step, s, with the hostile condition; its
// handler counts its calls.
func hostileWorkflow(t *testing.T, calls *atomic.Int32) *dag.Workflow {
	t.Helper()
	h := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		calls.Add(1)
		return nil, nil
	})
	wf, err := dag.New("hostile").Step("s", h, dag.When(hostileWhen)).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// TestWhenBudget runs a condition that would take half an hour: it fails
// the step on its first attempt, as a condition error naming the budget,
// with no retry and no lost worker (the lease is a second: the condition
// runs under the heartbeat).
func TestWhenBudget(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var calls atomic.Int32
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{hostileWorkflow(t, &calls)}
		o.Clock = engine.SystemClock
		o.Configure = func(c *engine.Config) {
			c.Lease = time.Second
			c.WhenBudget = 1500 * time.Millisecond
			c.MaxClockSkew = -1
		}
		env := enginetest.New(t, o)
		start := time.Now()
		id := env.Trigger(t, "hostile", hostileInput(300<<10))
		info := env.WaitTimeout(t, id, 20*time.Second)
		took := time.Since(start)
		env.AssertRun(t, info, persistence.RunFailed)
		env.AssertStep(t, info, "s", persistence.StepDead)
		if n := calls.Load(); n != 0 {
			t.Errorf("the handler ran %d times; want none", n)
		}
		var atts []persistence.Attempt
		for _, a := range info.Attempts {
			if a.Step == "s" {
				atts = append(atts, a)
			}
		}
		if len(atts) != 1 || atts[0].Outcome != persistence.OutcomeFailed {
			t.Fatalf("attempts of s = %+v; want one, failed", atts)
		}
		want := `dag: workflow "hostile": step "s": when "` + hostileWhen + `": when condition failed: stopped: dag: expression ran over its time budget of 1.5s (Config.WhenBudget)`
		if !strings.Contains(atts[0].Error, want) {
			t.Errorf("attempt error = %q; want it to contain %q", atts[0].Error, want)
		}
		t.Logf("the run failed %v after its trigger", took)
	})
}

// TestStopDuringWhen stops a node while a step's condition runs: the
// evaluation ends with the handlers' context, so Stop returns at its
// deadline instead of waiting for the condition.
func TestStopDuringWhen(t *testing.T) {
	var calls atomic.Int32
	env := enginetest.New(t, enginetest.Options{
		Workflows: []*dag.Workflow{hostileWorkflow(t, &calls)},
		Clock:     engine.SystemClock,
		Configure: func(c *engine.Config) {
			c.WhenBudget = time.Hour
			c.MaxClockSkew = -1
		},
	})
	id := env.Trigger(t, "hostile", hostileInput(300<<10))
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := env.Store.StepGet(context.Background(), id, "s")
		if err != nil {
			t.Fatal(err)
		}
		if st.Status == persistence.StepRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("step s is %s after 10s; want running", st.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // into the evaluation
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = env.Engine.Stop(ctx)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Stop returned after %v with a 500ms deadline", took)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the handler ran %d times; want none", n)
	}
}

// newMiniredisClient is a client of a miniredis that ends with t.
func newMiniredisClient(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestWhenBudgetValidated(t *testing.T) {
	_, err := engine.New(engine.Config{Store: sqliteStore(t), Redis: newMiniredisClient(t), WhenBudget: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "engine: Config.WhenBudget -1s is negative") {
		t.Fatalf("New = %v, want an error naming WhenBudget", err)
	}
}
