package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// parallel runs fn(i) for i in [0, n) at once (released together) and
// waits for all.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

func (s *suite) testConcurrentClaim(t *testing.T, st persistence.Store) {
	c := ctx(t)
	const n = 50
	for round := range 3 {
		r := createRun(t, st, "wf", "", "a")
		id := r.Run.ID
		var wins atomic.Int32
		var winner atomic.Value
		errs := make(chan error, n)
		parallel(n, func(i int) {
			fence := fmt.Sprintf("f%d", i)
			_, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: fence, Worker: fence, LeaseUntil: at(time.Minute), Now: t0})
			switch {
			case err == nil:
				wins.Add(1)
				winner.Store(fence)
			case !errors.Is(err, persistence.ErrNotClaimable):
				errs <- err
			}
		})
		close(errs)
		for err := range errs {
			t.Errorf("round %d: claim failed with an unexpected error: %v", round, err)
		}
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d claims won, want exactly 1", round, wins.Load())
		}
		got := getStep(t, st, id, "a")
		if got.Fence != winner.Load().(string) || got.Attempt != 1 {
			t.Errorf("round %d: step = %+v, want the winner's fence and attempt 1", round, got)
		}
		if atts, _ := st.AttemptList(c, id); len(atts) != 1 {
			t.Errorf("round %d: %d attempt rows, want 1", round, len(atts))
		}
	}
	// Takeover race: the lease expired; 50 workers try to take it over.
	r := createRun(t, st, "wf", "", "a")
	claim(t, st, r.Run.ID, "a", "old", t0)
	var wins atomic.Int32
	parallel(n, func(i int) {
		fence := fmt.Sprintf("t%d", i)
		if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: r.Run.ID, Step: "a", Fence: fence, Worker: fence, LeaseUntil: at(time.Hour), Now: at(2 * time.Minute)}); err == nil {
			wins.Add(1)
		} else if !errors.Is(err, persistence.ErrNotClaimable) {
			t.Errorf("takeover: %v", err)
		}
	})
	if wins.Load() != 1 {
		t.Errorf("%d takeovers won, want exactly 1", wins.Load())
	}
	atts, _ := st.AttemptList(c, r.Run.ID)
	if len(atts) != 2 || atts[0].Outcome != persistence.OutcomeLost || atts[1].Outcome != persistence.OutcomeRunning {
		t.Errorf("attempts after the takeover race = %+v", atts)
	}
}

func (s *suite) testConcurrentCreate(t *testing.T, st persistence.Store) {
	c := ctx(t)
	const n = 50
	ids := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	parallel(n, func(i int) {
		res, err := st.RunCreate(c, persistence.RunCreateParams{
			ID: newID(t), Workflow: "pay", Input: []byte(`{"amount":100}`), IdempotencyKey: "order-77",
			Now: t0, Steps: specs("a", "b:a", "c:a", "d:b,c"),
		})
		ids[i], created[i], errs[i] = res.Run.ID, res.Created, err
	})
	nCreated := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if created[i] {
			nCreated++
		}
		if ids[i] != ids[0] {
			t.Errorf("create %d got run %s, create 0 got %s", i, ids[i], ids[0])
		}
	}
	if nCreated != 1 {
		t.Errorf("%d creates report Created, want 1", nCreated)
	}
	page, err := st.RunList(c, persistence.RunListParams{Workflow: "pay"})
	if err != nil || len(page.Runs) != 1 {
		t.Errorf("runs of the workflow = %d, %v; want 1", len(page.Runs), err)
	}
	if steps, _ := st.StepList(c, ids[0]); len(steps) != 4 {
		t.Errorf("the run has %d steps, want 4", len(steps))
	}
	// And a conflicting input still conflicts under concurrency.
	var conflicts atomic.Int32
	parallel(10, func(i int) {
		_, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "pay", Input: []byte(fmt.Sprintf(`{"amount":%d}`, i+1)), IdempotencyKey: "order-77", Now: t0})
		if errors.Is(err, persistence.ErrIdempotencyConflict) {
			conflicts.Add(1)
		}
	})
	if conflicts.Load() != 10 {
		t.Errorf("%d conflicting creates reported a conflict, want 10", conflicts.Load())
	}
}

// testConcurrentJoin: two siblings completing at the same instant release
// their join step exactly once.
func (s *suite) testConcurrentJoin(t *testing.T, st persistence.Store) {
	reps := 200
	if testing.Short() {
		reps = 20
	}
	for rep := range reps {
		r := createRun(t, st, "wf", "", "a", "b", "c", "d:a,b,c")
		id := r.Run.ID
		for _, step := range []string{"a", "b", "c"} {
			claim(t, st, id, step, "f"+step, t0)
		}
		var released atomic.Int32
		var finished atomic.Int32
		parallel(3, func(i int) {
			step := string(rune('a' + i))
			res, err := st.StepComplete(ctx(t), persistence.StepCompleteParams{RunID: id, Step: step, Fence: "f" + step, Now: at(time.Second)})
			if err != nil {
				t.Errorf("rep %d: complete %s: %v", rep, step, err)
				return
			}
			for _, rd := range res.Ready {
				if rd.Step == "d" {
					released.Add(1)
				}
			}
			if res.RunFinished {
				finished.Add(1)
			}
		})
		if released.Load() != 1 || finished.Load() != 0 {
			t.Fatalf("rep %d: join released %d times (finished %d), want exactly once", rep, released.Load(), finished.Load())
		}
		if d := getStep(t, st, id, "d"); d.Status != persistence.StepQueued || d.PendingDeps != 0 {
			t.Fatalf("rep %d: join step = %+v, want queued with 0 pending", rep, d)
		}
	}
}

// testConcurrentFinish: the last steps completing at once finish the run
// exactly once.
func (s *suite) testConcurrentFinish(t *testing.T, st persistence.Store) {
	reps := 50
	if testing.Short() {
		reps = 10
	}
	for rep := range reps {
		r := createRun(t, st, "wf", "", "a", "b", "c")
		id := r.Run.ID
		for _, step := range []string{"a", "b", "c"} {
			claim(t, st, id, step, "f"+step, t0)
		}
		var finished atomic.Int32
		parallel(3, func(i int) {
			step := string(rune('a' + i))
			res, err := st.StepComplete(ctx(t), persistence.StepCompleteParams{RunID: id, Step: step, Fence: "f" + step, Now: at(time.Second)})
			if err != nil {
				t.Errorf("rep %d: complete %s: %v", rep, step, err)
			}
			if res.RunFinished {
				finished.Add(1)
			}
		})
		if finished.Load() != 1 {
			t.Fatalf("rep %d: run finished by %d completions, want 1", rep, finished.Load())
		}
		if run := getRun(t, st, id); run.Status != persistence.RunSucceeded {
			t.Fatalf("rep %d: run = %s, want succeeded", rep, run.Status)
		}
	}
}
