package faults

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// A queue concurrency limit with real processes: 4 worker nodes share a
// queue limited to 3 running steps; one node is SIGKILLed while it holds
// slots, and its slots come back at its node timeout.

const (
	wfLimited    = "limited" // one step, "slow", on limitedQueue
	limitedQueue = "lim"
	limitedStep  = 200 * time.Millisecond
)

func TestQueueLimitAcrossProcesses(t *testing.T) {
	const (
		limit = 3
		runs  = 100
	)
	c := newCluster(t, clusterOptions{Configure: func(cc *childConfig) {
		registryConfig(cc) // lease 60s, node timeout 5s
		cc.QueueLimits = map[string]engine.QueueLimit{limitedQueue: {Concurrency: limit}}
	}, NodeHeartbeat: registryHeartbeat, NodeTimeout: registryTimeout})
	ws := c.start(4, nil)
	ctx := context.Background()
	start := time.Now()
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = c.trigger(wfLimited, map[string]int{"i": i})
	}
	// Kill the first node while it runs a step, a fifth of the way in:
	// it dies holding a slot.
	victim := ws[0]
	var held string
	for seen := 0; held == ""; {
		ev := c.waitEvent(2*time.Minute, "limited")
		seen++
		if ev.Worker != victim || seen < runs/5 || len(ev.Fields) == 0 {
			continue
		}
		if st, err := c.store.StepGet(ctx, ev.Fields[0], "slow"); err == nil && st.Status == persistence.StepRunning && st.Attempt == 1 {
			victim.kill(t)
			held = ev.Fields[0]
		}
	}
	killedAt := time.Now()
	got := c.waitRuns(ids, 3*time.Minute)
	elapsed := time.Since(start)

	var atts []persistence.Attempt
	lost := 0
	var takenOver time.Duration
	for _, id := range ids {
		if got[id].Status != persistence.RunSucceeded {
			t.Errorf("run %s is %s, want succeeded", id, got[id].Status)
		}
		as, err := c.store.AttemptList(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.Kind != persistence.AttemptForward {
				continue
			}
			if a.FinishedAt == nil {
				t.Errorf("run %s: attempt %d has no finish time", id, a.Attempt)
				continue
			}
			if a.Outcome != persistence.OutcomeSucceeded {
				lost++
				if id == held {
					takenOver = a.FinishedAt.Sub(killedAt)
				}
			}
			atts = append(atts, a)
		}
	}
	// A lost attempt holds its slot until it is taken over (its finish
	// time): the bound counts it.
	most, mean := overlap(atts)
	gap := handoverGap(atts, limit)
	ideal := time.Duration(runs) * limitedStep / limit
	t.Logf("%d steps of %v, limit %d, 4 processes, one SIGKILLed holding slots (%d attempts lost): max running %d, mean running %.2f, median idle of a freed slot %v, all done %v after the first trigger (ideal %v); the killed node's step taken over %v after the kill (node timeout %v, lease %v)",
		runs, limitedStep, limit, lost, most, mean, gap.Round(100*time.Microsecond), elapsed.Round(time.Millisecond), ideal, takenOver.Round(time.Millisecond), registryTimeout, registryLease)
	if most > limit {
		t.Errorf("%d steps ran at once; the limit is %d", most, limit)
	}
	// Throughput at the limit: a slot is given back when its step's
	// completion has committed, so that the bound above holds by the
	// store's times though a node dies. The mean counts the killed
	// node's slot as busy until the takeover; the bound is loose for a
	// shared 2-core machine (measured figures: docs/flow-control.md).
	if mean < 1.5 {
		t.Errorf("mean %.2f running of the limit %d; a queue at its limit should keep its slots busy", mean, limit)
	}
	// The killed node's slot came back at its node timeout (5s), not
	// after its 60s lease: its step was taken over (and the other slots
	// kept working meanwhile, under the bound checked above).
	if takenOver <= 0 || takenOver > registryLease/2 {
		t.Errorf("the step the killed node held (run %s) was taken over %v after the kill; want about the node timeout %v, well before the lease %v",
			held, takenOver, registryTimeout, registryLease)
	}
}

// overlap is the most attempts running at one instant and the mean
// number running from the first start to the last end.
func overlap(atts []persistence.Attempt) (int, float64) {
	type edge struct {
		at time.Time
		d  int
	}
	var es []edge
	var busy time.Duration
	for _, a := range atts {
		es = append(es, edge{a.StartedAt, 1}, edge{*a.FinishedAt, -1})
		busy += a.FinishedAt.Sub(a.StartedAt)
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].at.Equal(es[j].at) {
			return es[i].d < es[j].d
		}
		return es[i].at.Before(es[j].at)
	})
	cur, most := 0, 0
	for _, e := range es {
		cur += e.d
		most = max(most, cur)
	}
	span := es[len(es)-1].at.Sub(es[0].at)
	return most, float64(busy) / float64(span)
}

// handoverGap is the median time a freed slot stayed idle, by the store's
// times, in a queue kept at its limit: the k-th start after the first
// limit ones takes the slot of the (k-limit)-th end. (The median: the
// killed node's slot is idle from its attempt's takeover on.)
func handoverGap(atts []persistence.Attempt, limit int) time.Duration {
	var starts, ends []time.Time
	for _, a := range atts {
		starts, ends = append(starts, a.StartedAt), append(ends, *a.FinishedAt)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	var gaps []time.Duration
	for k := limit; k < len(starts); k++ {
		gaps = append(gaps, starts[k].Sub(ends[k-limit]))
	}
	if len(gaps) == 0 {
		return 0
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	return gaps[len(gaps)/2]
}
