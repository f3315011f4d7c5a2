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
