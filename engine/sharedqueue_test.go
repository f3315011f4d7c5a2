package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// signupWorkflow is a -> b where a fails its first attempt and retries
// 100 ms later: the run of a step that goes through the queue twice.
func signupWorkflow(t *testing.T) *dag.Workflow {
	t.Helper()
	fail := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		if sc.Attempt == 1 {
			return nil, errors.New("first attempt fails")
		}
		return []byte(`{}`), nil
	})
	ok := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		return []byte(`{}`), nil
	})
	retry := dag.RetryPolicy{MaxAttempts: 2, InitialBackoff: 100 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond, Multiplier: 1, Jitter: dag.NoJitter}
	wf, err := dag.New("signup", dag.DefaultRetry(retry)).
		Step("create", fail).Step("welcome", ok, dag.After("create")).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// runLatencies triggers n signup runs one after the other on e and
// returns how long each took from creation to its end, sorted.
func runLatencies(t *testing.T, e *engine.Engine, st persistence.Store, n int) []time.Duration {
	t.Helper()
	ctx := context.Background()
	var out []time.Duration
	for i := range n {
		id, err := e.Trigger(ctx, "signup", map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		var run persistence.Run
		testenv.Eventually(t, 60*time.Second, func() bool {
			run, err = st.RunGet(ctx, id)
			return err == nil && run.Status.Terminal()
		}, "signup run did not end")
		if run.Status != persistence.RunSucceeded || run.FinishedAt == nil {
			t.Fatalf("run %s: %s (%s); want succeeded", id, run.Status, run.Error)
		}
		out = append(out, run.FinishedAt.Sub(run.CreatedAt))
	}
	slices.Sort(out)
	return out
}

func pct(ds []time.Duration, p float64) time.Duration {
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

// A node sharing its queue with nodes of another application gets its
// tasks without waiting for them to bounce: with 1 of 4 nodes able to run
// a workflow, its runs finish within twice their time with the node
// alone. (Before, each refusing node put the task back for a second: p90
// 6 to 16 s against 107 ms alone.)
//
// DAGFLOW_MEASURE=1 is the measure: 40 runs on the node alone,
// then 40 with the three other nodes on its queue, p50 and p90 within 2x.
// In the suite the baseline has the three nodes running too, on the same
// store but a queue of their own: on a loaded 2-core machine idle nodes
// polling one SQLite file slow every run several times over, which is the
// machine's load and not routing. Against that baseline the bounds get a
// slack for that load (250 ms at the median, 1 s at p90) that still
// fails the old bounces by seconds.
func TestSharedQueueOtherNodesDoNotDelay(t *testing.T) {
	measure := os.Getenv("DAGFLOW_MEASURE") != ""
	runs := 20
	if measure {
		runs = 40
	}
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			base, shared := measureSharedQueue(t, b, runs, !measure)
			what := "alone"
			if !measure {
				what = "with 3 nodes on another queue"
			}
			t.Logf("%s: %s p50/p90/max %v/%v/%v; with 3 nodes lacking it on its queue %v/%v/%v", b.name, what,
				pct(base, 0.5), pct(base, 0.9), base[len(base)-1], pct(shared, 0.5), pct(shared, 0.9), shared[len(shared)-1])
			p50, base50 := pct(shared, 0.5), pct(base, 0.5)
			p90, base90 := pct(shared, 0.9), pct(base, 0.9)
			slack50, slack90 := 250*time.Millisecond, time.Second
			if measure {
				slack50, slack90 = 0, 0
			}
			if bound := 2*base50 + slack50; p50 > bound {
				t.Errorf("p50 with 3 nodes lacking the workflow %v; want under %v (2x its p50 %s, %v, plus %v)", p50, bound, what, base50, slack50)
			}
			if bound := 2*base90 + slack90; p90 > bound {
				t.Errorf("p90 with 3 nodes lacking the workflow %v; want under %v (2x its p90 %s, %v, plus %v)", p90, bound, what, base90, slack90)
			}
		})
	}
}

// measureSharedQueue measures signup runs on one node, then with three
// nodes of another application on the same store, prefix and queue. With
// busyBase the first measure has those three nodes up already, on a
// prefix of their own.
func measureSharedQueue(t *testing.T, b sharedBackend, runs int, busyBase bool) (base, shared []time.Duration) {
	st, rdb, prefix := b.open(t)
	var calls atomic.Int64
	billing := okWorkflow(t, "billing", &calls)
	billingNodes := func(p string) []*engine.Engine {
		var out []*engine.Engine
		for i := range 3 {
			n := isoNode{store: st, redis: rdb, prefix: p, id: fmt.Sprintf("billing-%d", i), workflows: []*dag.Workflow{billing}}
			out = append(out, n.start(t))
		}
		return out
	}
	var others []*engine.Engine
	if busyBase {
		testenv.DeleteKeys(t, rdb, prefix+"-other")
		others = billingNodes(prefix + "-other")
	}
	alone := isoNode{store: st, redis: rdb, prefix: prefix, id: "alone", workflows: []*dag.Workflow{signupWorkflow(t)}}.start(t)
	base = runLatencies(t, alone, st, runs)
	alone.Stop(context.Background())
	for _, o := range others {
		o.Stop(context.Background())
	}

	p2 := prefix + "-shared"
	testenv.DeleteKeys(t, rdb, p2)
	billingNodes(p2)
	node := isoNode{store: st, redis: rdb, prefix: p2, id: "signup", workflows: []*dag.Workflow{signupWorkflow(t)}}.start(t)
	shared = runLatencies(t, node, st, runs)
	return base, shared
}
