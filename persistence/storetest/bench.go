package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/persistence"
)

// BenchmarkClaimComplete measures claim+complete pairs (two write
// transactions) on st: each iteration claims one queued step and completes
// it. Steps come from runs of 100 independent steps created outside the
// timer. b.RunParallel spreads the iterations over GOMAXPROCS*parallelism
// goroutines; parallelism 0 runs on one goroutine.
func BenchmarkClaimComplete(b *testing.B, st persistence.Store, parallelism int) {
	ctx := context.Background()
	const perRun = 100
	var steps []persistence.StepSpec
	for i := range perRun {
		steps = append(steps, persistence.StepSpec{Name: fmt.Sprintf("s%d", i), Queue: "bench"})
	}
	nRuns := (b.N + perRun - 1) / perRun
	runIDs := make([]string, nRuns)
	for i := range runIDs {
		id, _ := uuid.NewV7()
		if _, err := st.RunCreate(ctx, persistence.RunCreateParams{ID: id.String(), Workflow: "bench", Input: []byte(`{"n":1}`), Now: time.Now(), Steps: steps}); err != nil {
			b.Fatal(err)
		}
		runIDs[i] = id.String()
	}
	var next atomic.Int64
	work := func() error {
		n := next.Add(1) - 1
		// Consecutive iterations go to different runs, as the steps of many
		// runs would.
		run, step := runIDs[n%int64(nRuns)], fmt.Sprintf("s%d", n/int64(nRuns))
		fence := fmt.Sprintf("f%d", n)
		now := time.Now()
		if _, err := st.StepClaim(ctx, persistence.StepClaimParams{RunID: run, Step: step, Fence: fence, Worker: "bench", LeaseUntil: now.Add(time.Minute), Now: now}); err != nil {
			return err
		}
		_, err := st.StepComplete(ctx, persistence.StepCompleteParams{RunID: run, Step: step, Fence: fence, Output: []byte(`{"ok":true}`), Now: now})
		return err
	}
	b.ResetTimer()
	if parallelism <= 0 {
		for range b.N {
			if err := work(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := work(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claim+complete/s")
}

// BenchmarkClaimCompleteBatch measures the group-commit path: each
// iteration claims batch queued steps of different runs with one
// StepClaimMany and completes them with one StepCompleteMany (two write
// transactions for the whole batch), as the engine's workers do under
// load. The metric is steps per second.
func BenchmarkClaimCompleteBatch(b *testing.B, st persistence.Store, batch int) {
	ctx := context.Background()
	steps := []persistence.StepSpec{{Name: "a", Queue: "bench"}}
	ids := make([]string, b.N*batch)
	for lo := 0; lo < len(ids); lo += 256 {
		var ps []persistence.RunCreateParams
		for i := lo; i < min(lo+256, len(ids)); i++ {
			id, _ := uuid.NewV7()
			ids[i] = id.String()
			ps = append(ps, persistence.RunCreateParams{ID: ids[i], Workflow: "bench", Input: []byte(`{"n":1}`), Now: time.Now(), Steps: steps})
		}
		if _, err := st.RunCreateMany(ctx, persistence.RunCreateManyParams{Items: ps}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for n := range b.N {
		items := make([]persistence.StepClaimItem, batch)
		for i := range items {
			items[i] = persistence.StepClaimItem{RunID: ids[n*batch+i], Step: "a"}
		}
		now := time.Now()
		fence := fmt.Sprintf("f%d", n)
		outs, err := st.StepClaimMany(ctx, persistence.StepClaimManyParams{Items: items, Fence: fence, Worker: "bench", LeaseUntil: now.Add(time.Minute), Now: now})
		if err != nil {
			b.Fatal(err)
		}
		ps := make([]persistence.StepCompleteParams, 0, batch)
		for i, o := range outs {
			if o.Err != nil {
				b.Fatal(o.Err)
			}
			ps = append(ps, persistence.StepCompleteParams{RunID: items[i].RunID, Step: "a", Fence: fence, Output: []byte(`{"ok":true}`), Now: now})
		}
		cos, err := st.StepCompleteMany(ctx, persistence.StepCompleteManyParams{Items: ps})
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range cos {
			if o.Err != nil || !o.Result.RunFinished {
				b.Fatalf("complete: %v (finished %v)", o.Err, o.Result.RunFinished)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "steps/s")
}

// OrderSteps are the steps of the order workflow the benchmarks run:
// reserve, then notify and points in parallel, then ship.
var OrderSteps = []persistence.StepSpec{
	{Name: "reserve", Queue: "bench"},
	{Name: "notify", Deps: []string{"reserve"}, Queue: "bench"},
	{Name: "points", Deps: []string{"reserve"}, Queue: "bench"},
	{Name: "ship", Deps: []string{"notify", "points"}, Queue: "bench"},
}

// BenchmarkOrderRuns measures the store's share of running order
// workflows the way the engine does under load, with no engine, queue or
// handlers: each iteration creates batch runs with their root steps
// claimed at create (one transaction), then completes the claimed steps in
// three group commits, each claiming the steps it releases (reserve
// releases notify and points, those two release ship, ship finishes the
// run). That is four write transactions per batch of runs and every row
// write the engine makes for a run. The metrics are runs and steps per
// second of one caller.
func BenchmarkOrderRuns(b *testing.B, st persistence.Store, batch int) {
	ctx := context.Background()
	claim := func(n int) *persistence.ReleaseClaim {
		return &persistence.ReleaseClaim{Queues: []string{"bench"}, Max: n, Fence: uuid.NewString(), Worker: "bench",
			LeaseUntil: time.Now().Add(time.Minute)}
	}
	complete := func(claimed []persistence.StepClaimResult, fence string, release bool) ([]persistence.StepClaimResult, string) {
		ps := make([]persistence.StepCompleteParams, len(claimed))
		now := time.Now()
		for i, c := range claimed {
			ps[i] = persistence.StepCompleteParams{RunID: c.Step.RunID, Step: c.Step.Step, Fence: fence, Now: now}
		}
		var rc *persistence.ReleaseClaim
		if release {
			rc = claim(2 * len(ps))
		}
		outs, err := st.StepCompleteMany(ctx, persistence.StepCompleteManyParams{Items: ps, ClaimReleased: rc})
		if err != nil {
			b.Fatal(err)
		}
		var next []persistence.StepClaimResult
		for i, o := range outs {
			if o.Err != nil {
				b.Fatalf("complete %s/%s: %v", ps[i].RunID, ps[i].Step, o.Err)
			}
			if len(o.Result.Ready) > 0 {
				b.Fatalf("complete %s/%s: %d steps released but not claimed", ps[i].RunID, ps[i].Step, len(o.Result.Ready))
			}
			next = append(next, o.Result.Claimed...)
		}
		if rc == nil {
			return next, ""
		}
		return next, rc.Fence
	}
	b.ResetTimer()
	for range b.N {
		items := make([]persistence.RunCreateParams, batch)
		now := time.Now()
		for i := range items {
			id, _ := uuid.NewV7()
			items[i] = persistence.RunCreateParams{ID: id.String(), Workflow: "order", Version: 1, Input: []byte(`{"n":1}`), Now: now, Steps: OrderSteps}
		}
		rc := claim(batch)
		outs, err := st.RunCreateMany(ctx, persistence.RunCreateManyParams{Items: items, ClaimRoots: rc})
		if err != nil {
			b.Fatal(err)
		}
		var claimed []persistence.StepClaimResult
		for _, o := range outs {
			if o.Err != nil {
				b.Fatal(o.Err)
			}
			claimed = append(claimed, o.Claimed...)
		}
		if len(claimed) != batch {
			b.Fatalf("%d roots claimed at create, want %d", len(claimed), batch)
		}
		fence := rc.Fence
		for round, want := range []int{2 * batch, batch, 0} {
			claimed, fence = complete(claimed, fence, want > 0)
			if len(claimed) != want {
				b.Fatalf("round %d: %d steps claimed at release, want %d", round, len(claimed), want)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "runs/s")
	b.ReportMetric(float64(b.N*batch*len(OrderSteps))/b.Elapsed().Seconds(), "steps/s")
}
