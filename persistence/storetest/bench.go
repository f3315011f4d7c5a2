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
