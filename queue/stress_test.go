package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStress: 20 consumers work through 50,000 tasks with random delays,
// acks, retries and abandoned leases; every task must be acked exactly
// once and nothing may be left behind.
func TestStress(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test; skipped under -short")
	}
	const (
		tasks     = 50000
		consumers = 20
		lease     = 1500 * time.Millisecond
	)
	c := newRealRedis(t)
	q := newTestQueue(t, c, Config{PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var (
		mu        sync.Mutex
		acked     = make(map[string]int, tasks)
		ackedN    atomic.Int64
		retries   atomic.Int64
		abandoned atomic.Int64
		expired   atomic.Int64
	)
	done := make(chan struct{})
	var wg sync.WaitGroup

	// Producer: batches with random due times up to 200ms ahead.
	wg.Go(func() {
		for i := 0; i < tasks; i += 500 {
			items := make([]Item, 0, 500)
			for j := i; j < i+500; j++ {
				it := Item{ID: fmt.Sprintf("0192f3a4-5b6c-7d8e-9f00-%012d/step/1", j)}
				if rand.IntN(4) == 0 {
					it.At = time.Now().Add(time.Duration(rand.IntN(200)) * time.Millisecond)
				}
				items = append(items, it)
			}
			added, err := q.Enqueue(ctx, "stress", items...)
			if err != nil {
				t.Error(err)
				return
			}
			for k, a := range added {
				if !a {
					t.Errorf("task %s not added", items[k].ID)
				}
			}
		}
	})

	for range consumers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
				batch, err := q.Dequeue(cctx, DequeueParams{Queues: []string{"stress"}, Max: 20, Lease: lease})
				ccancel()
				if err != nil {
					if ctx.Err() != nil {
						t.Error(err)
						return
					}
					continue // timed out waiting: look at done again
				}
				var ack []string
				for _, task := range batch {
					if task.Deliveries > 1 {
						expired.Add(1)
					}
					r := rand.IntN(100)
					switch {
					case task.Deliveries < 3 && r < 5:
						abandoned.Add(1) // let the lease run out
					case task.Deliveries < 3 && r < 15:
						retries.Add(1)
						if err := q.Retry(ctx, "stress", task.ID, time.Now().Add(time.Duration(rand.IntN(50))*time.Millisecond)); err != nil {
							t.Error(err)
						}
					default:
						ack = append(ack, task.ID)
					}
				}
				if len(ack) == 0 {
					continue
				}
				if err := q.Ack(ctx, "stress", ack...); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, id := range ack {
					acked[id]++
				}
				mu.Unlock()
				if ackedN.Add(int64(len(ack))) == tasks {
					close(done)
				}
			}
		})
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Errorf("timed out with %d of %d acked", ackedN.Load(), tasks)
		cancel()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i := range tasks {
		id := fmt.Sprintf("0192f3a4-5b6c-7d8e-9f00-%012d/step/1", i)
		if acked[id] != 1 {
			t.Fatalf("task %s acked %d times", id, acked[id])
		}
	}
	wantStats(t, q, "stress", Stats{})
	iter := c.Scan(context.Background(), 0, q.pattern("stress"), 1000).Iterator()
	for iter.Next(context.Background()) {
		if k := iter.Val(); k != q.keys("stress").waiting {
			t.Errorf("key %s left behind", k)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("acked %d; %d retries, %d abandoned leases, %d redeliveries", len(acked), retries.Load(), abandoned.Load(), expired.Load())
}
