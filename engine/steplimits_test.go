package engine_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// TestConcurrencyKeyAcrossNodes: at most one step per customer runs at
// once on two nodes, while different customers run in parallel, and a
// customer at its limit does not hold back the others queued behind its
// steps.
func TestConcurrencyKeyAcrossNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const took = 200 * time.Millisecond
		wf, err := dag.New("billing").
			Step("charge", sleepStep(took), dag.Queue("bill"), dag.ConcurrencyKey("input.customer", 1)).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Clock, o.Workflows = engine.SystemClock, []*dag.Workflow{wf}
		envs := startNodes(t, o, 2, func(c *engine.Config, i int) {
			c.NodeID = fmt.Sprintf("node-%d", i)
			c.PollInterval = 2 * time.Second
		})
		// Customer a's steps first, all of them: b's and c's come behind
		// them in the queue and must not wait for them.
		byCustomer := map[string][]string{}
		var ids []string
		for i, cust := range []string{"a", "a", "a", "a", "a", "a", "b", "c", "b", "c"} {
			id := envs[i%len(envs)].Trigger(t, "billing", map[string]any{"customer": cust, "i": i})
			byCustomer[cust] = append(byCustomer[cust], id)
			ids = append(ids, id)
		}
		ctx := context.Background()
		// While a's first step runs, its next ones say why they wait.
		testenv.Eventually(t, 10*time.Second, func() bool {
			for _, id := range byCustomer["a"] {
				w, err := envs[0].Engine.WhyWaiting(ctx, id, "charge")
				if err == nil && w.Reason == engine.WaitLimited {
					t.Logf("why waiting: %s", w.Detail)
					return strings.Contains(w.Detail, `input.customer = "a"`)
				}
			}
			return false
		}, "no step of customer a was reported waiting for its key's limit")

		atts := forwardAttempts(t, envs[0], ids)
		runOf := map[string]string{}
		for cust, rs := range byCustomer {
			for _, id := range rs {
				runOf[id] = cust
			}
		}
		per := map[string][]persistence.Attempt{}
		for _, a := range atts {
			per[runOf[a.RunID]] = append(per[runOf[a.RunID]], a)
		}
		for cust, as := range per {
			if got := maxOverlap(as); got > 1 {
				t.Errorf("customer %s: %d steps ran at once; the key's limit is 1", cust, got)
			}
		}
		overall := maxOverlap(atts)
		// b's and c's steps ran while a's were still queued behind its limit.
		lastA := per["a"][0].StartedAt
		for _, a := range per["a"] {
			if a.StartedAt.After(lastA) {
				lastA = a.StartedAt
			}
		}
		var others []time.Time
		for _, a := range append(per["b"], per["c"]...) {
			others = append(others, a.StartedAt)
		}
		sort.Slice(others, func(i, j int) bool { return others[i].Before(others[j]) })
		t.Logf("%s: max concurrent %d over 3 customers; a's last start %v after b's and c's last start",
			b.name, overall, lastA.Sub(others[len(others)-1]).Round(time.Millisecond))
		if overall < 2 {
			t.Errorf("at most %d step ran at once: different customers must run in parallel", overall)
		}
		if !others[len(others)-1].Before(lastA) {
			t.Errorf("b's and c's steps all started only after a's last one (%v >= %v): a's limit blocked them",
				others[len(others)-1], lastA)
		}
	})
}

// TestStepRateLimitAcrossNodes: a step's own rate holds across nodes,
// and a limited step waits without spending attempts.
func TestStepRateLimitAcrossNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const (
			rate = 10
			runs = 25
		)
		wf, err := dag.New("paced-step").
			Step("call", sleepStep(0), dag.RateLimit(rate, time.Second)).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Clock, o.Workflows = engine.SystemClock, []*dag.Workflow{wf}
		envs := startNodes(t, o, 2, func(c *engine.Config, i int) {
			c.NodeID = fmt.Sprintf("node-%d", i)
			c.PollInterval = 2 * time.Second
		})
		var ids []string
		for i := 0; i < runs; i++ {
			ids = append(ids, envs[i%len(envs)].Trigger(t, "paced-step", map[string]int{"i": i}))
		}
		atts := forwardAttempts(t, envs[0], ids)
		sort.Slice(atts, func(i, j int) bool { return atts[i].StartedAt.Before(atts[j].StartedAt) })
		span := atts[len(atts)-1].StartedAt.Sub(atts[0].StartedAt)
		most := 0
		for i := range atts {
			n := 0
			for j := i; j < len(atts) && atts[j].StartedAt.Sub(atts[i].StartedAt) < time.Second; j++ {
				n++
			}
			most = max(most, n)
		}
		ideal := time.Duration(runs-1) * time.Second / rate
		t.Logf("%s: %d starts at %d/s over 2 nodes took %v (ideal %v); at most %d in a second",
			b.name, runs, rate, span.Round(time.Millisecond), ideal, most)
		if most > rate+1 {
			t.Errorf("%d starts within one second; the step's rate is %d/s", most, rate)
		}
		if span < ideal-100*time.Millisecond || span > 20*ideal {
			t.Errorf("%d starts took %v; at %d/s they take about %v", runs, span, rate, ideal)
		}
	})
}

// TestStoredDefinitionLimits: a node that knows a workflow only from the
// store (an API node, or one of an older deploy) enqueues its steps with
// their limits: four runs of one customer triggered there never overlap
// on the worker, whose key limit is 1.
func TestStoredDefinitionLimits(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			st, rdb, prefix := b.open(t)
			wf, err := dag.New("billing").
				Step("charge", sleepStep(150*time.Millisecond), dag.Queue("bill"), dag.ConcurrencyKey("input.customer", 1)).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			worker := isoNode{store: st, redis: rdb, prefix: prefix, id: "worker", workflows: []*dag.Workflow{wf}}.start(t)
			api := isoNode{store: st, redis: rdb, prefix: prefix, id: "api", noWorkers: true}.start(t)
			var ids []string
			for i := range 4 {
				id, err := api.Trigger(context.Background(), "billing", map[string]any{"customer": "a", "i": i})
				if err != nil {
					t.Fatalf("trigger on the API node: %v", err)
				}
				ids = append(ids, id)
			}
			waitFinished(t, worker, ids, 30*time.Second)
			var atts []persistence.Attempt
			for _, id := range ids {
				atts = append(atts, mustGet(t, worker, id).Attempts...)
			}
			if len(atts) != 4 {
				t.Fatalf("%d attempts, want 4 (one per run)", len(atts))
			}
			if got := maxOverlap(atts); got > 1 {
				t.Errorf("%d steps of customer a ran at once; the key's limit is 1", got)
			}
		})
	}
}
