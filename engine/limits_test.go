package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// sleepStep is a handler that takes d.
func sleepStep(d time.Duration) steps.Handler {
	return steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		select {
		case <-time.After(d):
			return json.RawMessage(`{}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
}

// nodes starts n engines sharing o's store, Redis and prefix.
func startNodes(t *testing.T, o enginetest.Options, n int, configure func(c *engine.Config, i int)) []*enginetest.Env {
	t.Helper()
	var envs []*enginetest.Env
	for i := 0; i < n; i++ {
		oi := o
		if i > 0 {
			oi.Store, oi.Redis, oi.Prefix = envs[0].Store, envs[0].Redis, envs[0].Prefix
		}
		oi.Configure = func(c *engine.Config) { configure(c, i) }
		envs = append(envs, enginetest.New(t, oi))
	}
	return envs
}

// maxOverlap is the most attempts of atts running at one instant, by the
// store's start and finish times.
func maxOverlap(atts []persistence.Attempt) int {
	type edge struct {
		at time.Time
		d  int
	}
	var es []edge
	for _, a := range atts {
		es = append(es, edge{a.StartedAt, 1}, edge{*a.FinishedAt, -1})
	}
	// At equal times an end comes before a start: a slot handed over.
	sort.Slice(es, func(i, j int) bool {
		if es[i].at.Equal(es[j].at) {
			return es[i].d < es[j].d
		}
		return es[i].at.Before(es[j].at)
	})
	cur, best := 0, 0
	for _, e := range es {
		cur += e.d
		best = max(best, cur)
	}
	return best
}

// forwardAttempts waits for runs and returns their forward attempts,
// asserting each run succeeded at its first attempt.
func forwardAttempts(t *testing.T, env *enginetest.Env, ids []string) []persistence.Attempt {
	t.Helper()
	var out []persistence.Attempt
	for _, id := range ids {
		info := env.WaitTimeout(t, id, 2*time.Minute)
		env.AssertRun(t, info, persistence.RunSucceeded)
		for _, a := range info.Attempts {
			if a.Kind != persistence.AttemptForward {
				continue
			}
			if a.Attempt != 1 || a.FinishedAt == nil {
				t.Errorf("run %s step %s: attempt %d (finished %v); want one finished first attempt (waiting spends none)", id, a.Step, a.Attempt, a.FinishedAt)
			}
			out = append(out, a)
		}
	}
	return out
}

func TestQueueConcurrencyLimitAcrossNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const (
			limit = 3
			runs  = 30
			took  = 200 * time.Millisecond
		)
		wf, err := dag.New("limited").Step("work", sleepStep(took), dag.Queue("lim")).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Clock, o.Workflows = engine.SystemClock, []*dag.Workflow{wf}
		envs := startNodes(t, o, 4, func(c *engine.Config, i int) {
			c.NodeID = fmt.Sprintf("node-%d", i)
			// No polling to speak of: a freed slot must wake the waiters.
			c.PollInterval = 2 * time.Second
			c.QueueLimits = map[string]engine.QueueLimit{"lim": {Concurrency: limit}}
		})
		start := time.Now()
		var ids []string
		for i := 0; i < runs; i++ {
			// Triggered on every node: none may claim at create past the limit.
			ids = append(ids, envs[i%len(envs)].Trigger(t, "limited", map[string]int{"i": i}))
		}
		atts := forwardAttempts(t, envs[0], ids)
		elapsed := time.Since(start)
		ideal := time.Duration(runs) * took / limit
		workers := map[string]bool{}
		first, last := atts[0].StartedAt, *atts[0].FinishedAt
		var busy time.Duration
		for _, a := range atts {
			workers[a.Worker] = true
			busy += a.FinishedAt.Sub(a.StartedAt)
			if a.StartedAt.Before(first) {
				first = a.StartedAt
			}
			if a.FinishedAt.After(last) {
				last = *a.FinishedAt
			}
		}
		t.Logf("%s: %d steps of %v, limit %d, 4 nodes: max concurrent %d, mean concurrent %.2f from the first start to the last end (%v), took %v with the triggers (ideal %v), on %d nodes",
			b.name, runs, took, limit, maxOverlap(atts), float64(busy)/float64(last.Sub(first)), last.Sub(first).Round(time.Millisecond),
			elapsed.Round(time.Millisecond), ideal, len(workers))
		if got := maxOverlap(atts); got > limit {
			t.Errorf("%d steps ran at once; the limit is %d", got, limit)
		}
		if elapsed < ideal-took {
			t.Errorf("took %v, under the %v the limit allows", elapsed, ideal)
		}
		// The machine is shared and noisy: only a sanity bound here; the
		// throughput is measured and reported (docs/flow-control.md).
		if elapsed > 20*ideal {
			t.Errorf("took %v; at the limit it takes about %v", elapsed, ideal)
		}
	})
}

func TestQueueRateLimitAcrossNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const (
			rate = 20
			runs = 60
		)
		wf, err := dag.New("paced").Step("call", sleepStep(0), dag.Queue("api")).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Clock, o.Workflows = engine.SystemClock, []*dag.Workflow{wf}
		envs := startNodes(t, o, 3, func(c *engine.Config, i int) {
			c.NodeID = fmt.Sprintf("node-%d", i)
			// No polling to speak of: the next token's time must wake them.
			c.PollInterval = 2 * time.Second
			c.QueueLimits = map[string]engine.QueueLimit{"api": {Rate: rate, Per: time.Second}}
		})
		var ids []string
		for i := 0; i < runs; i++ {
			ids = append(ids, envs[i%len(envs)].Trigger(t, "paced", nil))
		}
		atts := forwardAttempts(t, envs[0], ids)
		sort.Slice(atts, func(i, j int) bool { return atts[i].StartedAt.Before(atts[j].StartedAt) })
		span := atts[len(atts)-1].StartedAt.Sub(atts[0].StartedAt)
		// Any one-second window holds at most rate+1 starts (burst 1).
		most := 0
		for i := range atts {
			n := 0
			for j := i; j < len(atts) && atts[j].StartedAt.Sub(atts[i].StartedAt) < time.Second; j++ {
				n++
			}
			most = max(most, n)
		}
		t.Logf("%s: %d starts at %d/s over 3 nodes took %v (ideal %v); at most %d in a second",
			b.name, runs, rate, span.Round(time.Millisecond), time.Duration(runs-1)*time.Second/rate, most)
		if most > rate+1 {
			t.Errorf("%d starts within one second; the rate is %d/s", most, rate)
		}
		if ideal := time.Duration(runs-1) * time.Second / rate; span < ideal-100*time.Millisecond || span > 20*ideal {
			t.Errorf("%d starts took %v; at %d/s they take about %v", runs, span, rate, ideal)
		}
	})
}

// silentStore is a node cut off from the store for claims too: a node
// that died (its Redis connection lingers, which changes nothing).
type silentStore struct{ partitionedStore }

func (s *silentStore) StepClaimMany(ctx context.Context, p persistence.StepClaimManyParams) ([]persistence.StepClaimOutcome, error) {
	if s.cut.Load() {
		return nil, errPartitioned
	}
	return s.Store.StepClaimMany(ctx, p)
}

func (s *silentStore) StepClaim(ctx context.Context, p persistence.StepClaimParams) (persistence.StepClaimResult, error) {
	if s.cut.Load() {
		return persistence.StepClaimResult{}, errPartitioned
	}
	return s.Store.StepClaim(ctx, p)
}

func TestQueueLimitWhyWaitingAndDeadNode(t *testing.T) {
	testLimitWhyWaitingAndDeadNode(t, nil, map[string]engine.QueueLimit{"one": {Concurrency: 1}})
}

// TestConcurrencyKeyDeadNode: the slot of a key held by a node that
// went silent comes back when the node is declared dead.
func TestConcurrencyKeyDeadNode(t *testing.T) {
	testLimitWhyWaitingAndDeadNode(t, []dag.StepOption{dag.ConcurrencyKey("input.tenant", 1)}, nil)
}

// testLimitWhyWaitingAndDeadNode runs two steps of a queue "one" that
// lets one run at once (by stepOpts or by limits): the second is
// reported limited while the first holds the slot, and the slot comes
// back at the node timeout when the first's node goes silent.
func testLimitWhyWaitingAndDeadNode(t *testing.T, stepOpts []dag.StepOption, limits map[string]engine.QueueLimit) {
	eachBackend(t, func(t *testing.T, b backend) {
		const nodeTimeout = 3 * time.Second
		gate := make(chan struct{})
		defer close(gate)
		held := make(chan string, 4)
		build := func(h steps.Handler) *dag.Workflow {
			wf, err := dag.New("held").Step("hold", h, append([]dag.StepOption{dag.Queue("one")}, stepOpts...)...).Build()
			if err != nil {
				t.Fatal(err)
			}
			return wf
		}
		// The victim's handler ignores its context: a node that hangs.
		victimWF := build(steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			held <- sc.RunID
			<-gate
			return json.RawMessage(`{"by":"victim"}`), nil
		}))
		rescuerWF := build(steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			return json.RawMessage(`{"by":"rescuer"}`), nil
		}))
		o := b.opts(t)
		base := o.Store
		if base == nil {
			base = sqliteStore(t)
		}
		ps := &silentStore{partitionedStore: partitionedStore{Store: base}}
		timing := func(c *engine.Config, id string) {
			c.NodeID, c.Lease, c.Heartbeat = id, time.Minute, 20*time.Second
			c.NodeHeartbeat, c.NodeTimeout = 500*time.Millisecond, nodeTimeout
			c.StopGrace = -1
			c.QueueLimits = limits
		}
		o.Store, o.Clock, o.Workflows = ps, engine.SystemClock, []*dag.Workflow{victimWF}
		o.Configure = func(c *engine.Config) { timing(c, "victim") }
		victim := enginetest.New(t, o)
		first := victim.Trigger(t, "held", map[string]int{"n": 1})
		select {
		case id := <-held:
			if id != first {
				t.Fatalf("held run %s, want %s", id, first)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the first step never started")
		}
		second := victim.Trigger(t, "held", map[string]int{"n": 2})
		ctx := context.Background()
		testenv.Eventually(t, 10*time.Second, func() bool {
			w, err := victim.Engine.WhyWaiting(ctx, second, "hold")
			return err == nil && w.Reason == engine.WaitLimited
		}, "the second step is not reported waiting for the queue's limit")
		w, _ := victim.Engine.WhyWaiting(ctx, second, "hold")
		t.Logf("why waiting: %s", w.Detail)
		if limits == nil && !strings.Contains(w.Detail, "input.tenant") {
			t.Errorf("why waiting = %q; want it to name the key", w.Detail)
		}
		if info := mustGet(t, victim.Engine, second); info.Steps[0].Status != persistence.StepQueued {
			t.Fatalf("second step is %s while the only slot is held; want queued", info.Steps[0].Status)
		}

		ro := o
		ro.Store, ro.Redis, ro.Prefix, ro.Workflows = base, victim.Redis, victim.Prefix, []*dag.Workflow{rescuerWF}
		ro.Configure = func(c *engine.Config) { timing(c, "rescuer") }
		rescuer := enginetest.New(t, ro)
		testenv.Eventually(t, 10*time.Second, func() bool {
			nodes, err := rescuer.Engine.Nodes(ctx)
			return err == nil && len(nodes) == 2
		}, "two nodes never heartbeated")

		// The victim goes silent holding the slot: the slot comes back
		// when the registry declares it dead, not when its 1m lease ends.
		ps.cut.Store(true)
		cutAt := time.Now()
		for _, id := range []string{first, second} {
			info := rescuer.WaitTimeout(t, id, 40*time.Second)
			rescuer.AssertRun(t, info, persistence.RunSucceeded)
			if s, _ := info.Step("hold"); string(s.Output) != `{"by":"rescuer"}` {
				t.Errorf("run %s output %s; want the rescuer's", id, s.Output)
			}
		}
		took := time.Since(cutAt)
		t.Logf("%s: both steps done %v after the victim went silent (node timeout %v, lease 1m)", b.name, took.Round(10*time.Millisecond), nodeTimeout)
		if took > nodeTimeout+15*time.Second {
			t.Errorf("the slot came back %v after the victim went silent; want about the node timeout %v", took, nodeTimeout)
		}
	})
}
