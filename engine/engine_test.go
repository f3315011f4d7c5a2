package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
	"github.com/dagflow/dagflow/steps"
)

func TestOrderSucceedsWithParallelFanOut(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		wf := orderWorkflow(t, r, "order", 150*time.Millisecond, nil, true, nil)
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		env := enginetest.New(t, o)
		id := env.Trigger(t, "order", map[string]any{"total": 120})
		info := env.Wait(t, id)
		env.AssertRun(t, info, persistence.RunSucceeded)
		for _, s := range []string{"reserve", "notify", "points", "ship"} {
			env.AssertStep(t, info, s, persistence.StepSucceeded)
			if got := successes(info, s); got != 1 {
				t.Errorf("step %s: %d successful attempts recorded, want 1", s, got)
			}
		}
		notify, points, ship := r.find("notify", false), r.find("points", false), r.find("ship", false)
		if len(notify) != 1 || len(points) != 1 || len(ship) != 1 {
			t.Fatalf("calls: notify %d, points %d, ship %d; want 1 each", len(notify), len(points), len(ship))
		}
		n, p, s := notify[0], points[0], ship[0]
		if !(n.Start.Before(p.End) && p.Start.Before(n.End)) {
			t.Errorf("notify [%v, %v] and points [%v, %v] did not overlap", n.Start, n.End, p.Start, p.End)
		}
		if s.Start.Before(n.End) || s.Start.Before(p.End) {
			t.Errorf("ship started at %v, before notify (%v) or points (%v) ended", s.Start, n.End, p.End)
		}
		shipStep, _ := info.Step("ship")
		var out struct{ Seen []string }
		if err := json.Unmarshal(shipStep.Output, &out); err != nil {
			t.Fatalf("ship output %s: %v", shipStep.Output, err)
		}
		seen := strings.Join(sortStrings(out.Seen), ",")
		if seen != "notify,points,reserve" && seen != "notify,points" {
			t.Errorf("ship saw outputs of %q, want notify and points (and reserve)", seen)
		}
		if got := string(info.Output()); !strings.Contains(got, `"ship"`) {
			t.Errorf("run output %s does not hold ship's output", got)
		}
		if s := r.find("reserve", true); len(s) != 0 {
			t.Errorf("a compensation ran in a successful run: %+v", s)
		}
	})
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestWhenFalseSkipsStepAndDependentsStillRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		wf := orderWorkflow(t, r, "order", 0, nil, false, map[string][]dag.StepOption{
			"points": {dag.When("input.total >= 100")},
		})
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		env := enginetest.New(t, o)
		info := env.Wait(t, env.Trigger(t, "order", map[string]any{"total": 40}))
		env.AssertRun(t, info, persistence.RunSucceeded)
		env.AssertStep(t, info, "points", persistence.StepSkipped)
		env.AssertStep(t, info, "ship", persistence.StepSucceeded)
		if got := len(r.find("points", false)); got != 0 {
			t.Errorf("points handler ran %d times, want 0", got)
		}
		info = env.Wait(t, env.Trigger(t, "order", map[string]any{"total": 400}))
		env.AssertStep(t, info, "points", persistence.StepSucceeded)
	})
}

func TestRetriesWithBackoffThenSucceeds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		fail := func(sc steps.Context) error {
			if sc.Step == "notify" && sc.Attempt <= 2 {
				return fmt.Errorf("mail service down (attempt %d)", sc.Attempt)
			}
			return nil
		}
		policy := dag.RetryPolicy{MaxAttempts: 5, InitialBackoff: 2 * time.Second, MaxBackoff: time.Minute, Multiplier: 3, Jitter: 0.5}
		wf := orderWorkflow(t, r, "order", 0, fail, false, map[string][]dag.StepOption{"notify": {dag.Retry(policy)}})
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		env := enginetest.New(t, o)
		info := env.Wait(t, env.Trigger(t, "order", nil))
		env.AssertRun(t, info, persistence.RunSucceeded)
		var atts []persistence.Attempt
		for _, a := range info.Attempts {
			if a.Step == "notify" && a.Kind == persistence.AttemptForward {
				atts = append(atts, a)
			}
		}
		if len(atts) != 3 {
			t.Fatalf("notify has %d attempts in the history, want 3: %+v", len(atts), atts)
		}
		for i, want := range []persistence.AttemptOutcome{persistence.OutcomeFailed, persistence.OutcomeFailed, persistence.OutcomeSucceeded} {
			if atts[i].Outcome != want || atts[i].Attempt != i+1 {
				t.Errorf("attempt %d: got #%d %s, want #%d %s", i, atts[i].Attempt, atts[i].Outcome, i+1, want)
			}
		}
		if !strings.Contains(atts[0].Error, "mail service down (attempt 1)") {
			t.Errorf("attempt 1 error %q does not carry the handler's error", atts[0].Error)
		}
		// The gap between a failure and the next attempt is the backoff:
		// nominal 2s then 6s, each with up to 50% jitter taken off.
		for i, nominal := range []time.Duration{2 * time.Second, 6 * time.Second} {
			if atts[i].FinishedAt == nil {
				t.Fatalf("attempt %d has no finish time", i+1)
			}
			gap := atts[i+1].StartedAt.Sub(*atts[i].FinishedAt)
			if gap < nominal/2 || gap > nominal+time.Second {
				t.Errorf("gap before attempt %d = %v, want within [%v, %v]", i+2, gap, nominal/2, nominal)
			}
		}
	})
}

func TestPermanentFailureCompensatesInReverseOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		fail := func(sc steps.Context) error {
			if sc.Step == "ship" && !sc.Compensation {
				return steps.Permanent(errors.New("carrier refused the parcel"))
			}
			return nil
		}
		wf := orderWorkflow(t, r, "order", 20*time.Millisecond, fail, true, nil)
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		env := enginetest.New(t, o)
		id := env.Trigger(t, "order", nil)
		info := env.Wait(t, id)
		env.AssertRun(t, info, persistence.RunCompensated)
		env.AssertStep(t, info, "ship", persistence.StepDead)
		for _, s := range []string{"reserve", "notify", "points"} {
			env.AssertStep(t, info, s, persistence.StepCompensated)
			if got := len(r.find(s, true)); got != 1 {
				t.Errorf("compensation of %s ran %d times, want 1", s, got)
			}
		}
		if got := len(r.find("ship", true)); got != 0 {
			t.Errorf("the dead step's compensation ran %d times, want 0", got)
		}
		if got := len(r.find("ship", false)); got != 1 {
			t.Errorf("a permanent error was retried: ship ran %d times", got)
		}
		// reserve is undone only after both of its dependents were.
		rc := r.find("reserve", true)[0]
		for _, dep := range []string{"notify", "points"} {
			dc := r.find(dep, true)[0]
			if rc.Start.Before(dc.End) {
				t.Errorf("reserve compensation started at %v before %s's ended at %v", rc.Start, dep, dc.End)
			}
		}
		page, err := env.Engine.DeadLetters(context.Background(), persistence.StepListDeadParams{Workflow: "order"})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Steps) != 1 || page.Steps[0].RunID != id || page.Steps[0].Step != "ship" || !strings.Contains(page.Steps[0].Error, "carrier refused") {
			t.Fatalf("dead letters = %+v, want ship of run %s with its error", page.Steps, id)
		}
		// Retrying it redoes the undone work: retry_test.go.
	})
}

func TestRetryDeadResumesRunWithoutCompensations(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		var fixed atomic.Bool
		fail := func(sc steps.Context) error {
			if sc.Step == "ship" && !fixed.Load() {
				return steps.Permanent(errors.New("address invalid"))
			}
			return nil
		}
		wf := orderWorkflow(t, r, "order", 0, fail, false, nil)
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		env := enginetest.New(t, o)
		id := env.Trigger(t, "order", nil)
		info := env.Wait(t, id)
		env.AssertRun(t, info, persistence.RunFailed)
		env.AssertStep(t, info, "ship", persistence.StepDead)
		fixed.Store(true)
		if err := env.Engine.RetryDead(context.Background(), id, "ship"); err != nil {
			t.Fatalf("RetryDead: %v", err)
		}
		info = env.Wait(t, id)
		env.AssertRun(t, info, persistence.RunSucceeded)
		env.AssertStep(t, info, "ship", persistence.StepSucceeded)
		for _, s := range []string{"reserve", "notify", "points"} {
			if got := len(r.find(s, false)); got != 1 {
				t.Errorf("%s ran %d times; a resumed run must keep completed steps", s, got)
			}
		}
		if err := env.Engine.RetryDead(context.Background(), id, "ship"); !errors.Is(err, engine.ErrRetryRefused) {
			t.Errorf("second RetryDead: err = %v, want ErrRetryRefused", err)
		}
	})
}

func TestConcurrentTriggersWithOneKeyMakeOneRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}
		env := enginetest.New(t, o)
		var wg sync.WaitGroup
		ids := make([]string, 50)
		errs := make([]error, 50)
		created := make([]bool, 50)
		for i := range ids {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ids[i], errs[i] = env.Engine.Trigger(context.Background(), "order", map[string]int{"order": 7},
					engine.IdempotencyKey("order-7"), engine.Created(&created[i]))
			}(i)
		}
		wg.Wait()
		if n := countTrue(created); n != 1 {
			t.Errorf("%d calls report that they created the run; want exactly 1", n)
		}
		for i := range ids {
			if errs[i] != nil {
				t.Fatalf("trigger %d: %v", i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("trigger %d returned run %s, trigger 0 run %s", i, ids[i], ids[0])
			}
		}
		env.AssertRun(t, env.Wait(t, ids[0]), persistence.RunSucceeded)
		page, err := env.Store.RunList(context.Background(), persistence.RunListParams{Workflow: "order"})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) != 1 {
			t.Errorf("%d runs stored, want 1", len(page.Runs))
		}
		if got := len(r.find("reserve", false)); got != 1 {
			t.Errorf("reserve ran %d times, want 1", got)
		}
		_, err = env.Engine.Trigger(context.Background(), "order", map[string]int{"order": 8}, engine.IdempotencyKey("order-7"))
		if !errors.Is(err, persistence.ErrIdempotencyConflict) {
			t.Errorf("same key, other input: err = %v, want ErrIdempotencyConflict", err)
		}
	})
}

func TestTriggerErrors(t *testing.T) {
	r := &recorder{}
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}})
	ctx := context.Background()
	if _, err := env.Engine.Trigger(ctx, "nope", nil); !errors.Is(err, engine.ErrUnknownWorkflow) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown workflow: err = %v", err)
	}
	if _, err := env.Engine.Trigger(ctx, "order", json.RawMessage(`{"a":`)); !errors.Is(err, engine.ErrInvalidInput) ||
		err.Error() != `engine: workflow "order": invalid input: not valid JSON` {
		t.Errorf("invalid JSON input: err = %v", err)
	}
	if _, err := env.Engine.Trigger(ctx, "order", map[string]any{"f": func() {}}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Errorf("unencodable input: err = %v", err)
	}
	big := strings.Repeat("x", 2<<20)
	if _, err := env.Engine.Trigger(ctx, "order", map[string]string{"blob": big}); !errors.Is(err, persistence.ErrTooLarge) {
		t.Errorf("oversized input: err = %v, want ErrTooLarge", err)
	}
	page, err := env.Store.RunList(ctx, persistence.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 0 {
		t.Errorf("rejected triggers stored %d runs", len(page.Runs))
	}
	if err := env.Engine.Register(orderWorkflow(t, r, "order", 0, nil, false, nil)); !errors.Is(err, engine.ErrDuplicateWorkflow) {
		t.Errorf("duplicate register: err = %v", err)
	}
}

func TestPanicIsRecordedWithStack(t *testing.T) {
	r := &recorder{}
	boom := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		panic("inventory index out of range")
	})
	wf, err := dag.New("poison", dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Second, MaxBackoff: time.Second, Multiplier: 1})).
		Step("reserve", r.handler(0, nil), dag.Compensate(r.handler(0, nil))).
		Step("pick", boom, dag.After("reserve")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{wf}})
	info := env.Wait(t, env.Trigger(t, "poison", nil))
	env.AssertRun(t, info, persistence.RunCompensated)
	env.AssertStep(t, info, "pick", persistence.StepDead)
	var panics int
	for _, a := range info.Attempts {
		if a.Step == "pick" {
			panics++
			if !strings.Contains(a.Error, "inventory index out of range") || !strings.Contains(a.Error, "goroutine") && !strings.Contains(a.Error, ".go:") {
				t.Errorf("attempt %d error lacks the panic value or stack: %q", a.Attempt, a.Error)
			}
		}
	}
	if panics != 2 {
		t.Errorf("pick attempts = %d, want 2", panics)
	}
	if got := len(r.find("reserve", true)); got != 1 {
		t.Errorf("reserve compensated %d times, want 1", got)
	}
}

func TestThousandRunsTwentyWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}
		o.Configure = func(c *engine.Config) { c.Concurrency = 20 }
		env := enginetest.New(t, o)
		const n = 1000
		ids := make([]string, n)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := g; i < n; i += 4 {
					id, err := env.Engine.Trigger(context.Background(), "order", map[string]int{"i": i})
					if err != nil {
						t.Errorf("trigger: %v", err)
						return
					}
					ids[i] = id
				}
			}(g)
		}
		wg.Wait()
		for _, id := range ids {
			info := env.WaitTimeout(t, id, 3*time.Minute)
			env.AssertRun(t, info, persistence.RunSucceeded)
			for _, s := range []string{"reserve", "notify", "points", "ship"} {
				if got := successes(info, s); got != 1 {
					t.Fatalf("run %s step %s: %d successes recorded, want 1", id, s, got)
				}
			}
		}
		if got := len(r.all()); got != 4*n {
			t.Errorf("handlers ran %d times, want %d", got, 4*n)
		}
		testenv.Eventually(t, 5*time.Second, func() bool {
			st, err := env.Engine.Queue().Stats(context.Background(), "default")
			return err == nil && st == (queue.Stats{})
		}, "tasks left in Redis after every run finished")
	})
}

// TestConcurrencyBoundWithClaimAtRelease runs fan-out runs on a node of
// three slots: the completions hand their slots to the steps they release
// (and the run creations claim roots on free ones), yet no more than three
// handlers ever run at once, and every step runs once.
func TestConcurrencyBoundWithClaimAtRelease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const slots = 3
		var running, peak, calls atomic.Int64
		h := stepsFunc(func(context.Context) error {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			calls.Add(1)
			time.Sleep(time.Millisecond)
			running.Add(-1)
			return nil
		})
		wf, err := dag.New("fan").Step("a", h).
			Step("b", h, dag.After("a")).Step("c", h, dag.After("a")).Step("d", h, dag.After("a")).
			Step("e", h, dag.After("b", "c", "d")).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Clock = engine.SystemClock
		o.Workflows = []*dag.Workflow{wf}
		o.Configure = func(c *engine.Config) { c.Concurrency = slots }
		env := enginetest.New(t, o)
		const n = 60
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids[i] = env.Trigger(t, "fan", nil)
			}()
		}
		wg.Wait()
		for _, id := range ids {
			env.AssertRun(t, env.WaitTimeout(t, id, time.Minute), persistence.RunSucceeded)
		}
		if got := calls.Load(); got != 5*n {
			t.Errorf("handlers ran %d times, want %d", got, 5*n)
		}
		if got := peak.Load(); got > slots {
			t.Errorf("%d handlers ran at once on a node of %d slots", got, slots)
		}
		st := env.Engine.Stats()
		if st.ClaimedAtRelease == 0 {
			t.Errorf("no step was claimed at release: stats %+v", st)
		}
		t.Logf("peak %d; claimed at release %d, at create %d, through the queue %d", peak.Load(), st.ClaimedAtRelease, st.ClaimedAtCreate, st.ClaimItems)
	})
}

// RetryRun takes every dead step of a failed run back at once.
func TestRetryRunRetriesEveryDeadStep(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		var fixed atomic.Bool
		var both sync.WaitGroup
		both.Add(2)
		var once sync.Map
		fail := func(sc steps.Context) error {
			if (sc.Step == "notify" || sc.Step == "points") && !fixed.Load() {
				// Both fail together, so that both dead-letter.
				if _, again := once.LoadOrStore(sc.Step, true); !again {
					both.Done()
					both.Wait()
				}
				return steps.Permanent(errors.New("provider down"))
			}
			return nil
		}
		wf := orderWorkflow(t, r, "order", 0, fail, false, nil)
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		env := enginetest.New(t, o)
		id := env.Trigger(t, "order", map[string]int{"total": 500})
		// The run fails with the first dead letter; the second lands after.
		testenv.Eventually(t, 10*time.Second, func() bool {
			info, err := env.Engine.Get(context.Background(), id)
			return err == nil && info.Run.Status == persistence.RunFailed &&
				stepStatus(info, "notify") == persistence.StepDead && stepStatus(info, "points") == persistence.StepDead
		}, "notify and points did not both dead-letter")

		fixed.Store(true)
		retried, err := env.Engine.RetryRun(context.Background(), id)
		if err != nil {
			t.Fatalf("RetryRun: %v", err)
		}
		if strings.Join(retried, ",") != "notify,points" {
			t.Errorf("RetryRun retried %v; want [notify points]", retried)
		}
		info := env.Wait(t, id)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if got := len(r.find("reserve", false)); got != 1 {
			t.Errorf("reserve ran %d times; a retried run keeps its successes", got)
		}
		var rr *engine.RetryRefusedError
		if _, err := env.Engine.RetryRun(context.Background(), id); !errors.As(err, &rr) || !strings.Contains(err.Error(), "succeeded") {
			t.Errorf("RetryRun of a succeeded run: %v; want a refusal naming its status", err)
		}
		if _, err := env.Engine.RetryRun(context.Background(), "0190c4a4-0000-7000-8000-000000000000"); !errors.Is(err, persistence.ErrRunNotFound) {
			t.Errorf("RetryRun of an unknown run: %v; want ErrRunNotFound", err)
		}
	})
}

func stepStatus(info engine.RunInfo, step string) persistence.StepStatus {
	for _, s := range info.Steps {
		if s.Step == step {
			return s.Status
		}
	}
	return ""
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
