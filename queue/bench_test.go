package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmarks run on the shared loopback Redis, each on its own key
// prefix. Ids look like the engine's: "<uuid>/<step>/<attempt>", 45 bytes.

func benchID(i int) string {
	return fmt.Sprintf("0192f3a4-5b6c-7d8e-9f00-%012d/reserve/1", i)
}

func benchQueue(b *testing.B) *Queue {
	return newTestQueue(b, newRealRedis(b), Config{})
}

func BenchmarkEnqueue(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprint("batch=", batch), func(b *testing.B) {
			q := benchQueue(b)
			ctx := context.Background()
			items := make([]Item, 0, batch)
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				items = items[:0]
				for j := i; j < min(i+batch, b.N); j++ {
					items = append(items, Item{ID: benchID(j)})
				}
				if _, err := q.Enqueue(ctx, "bench", items...); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkDequeueAck: one consumer drains a full queue; an op is one task.
func BenchmarkDequeueAck(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprint("batch=", batch), func(b *testing.B) {
			q := benchQueue(b)
			ctx := context.Background()
			fill(b, q, "bench", b.N)
			b.ResetTimer()
			for n := 0; n < b.N; {
				tasks, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"bench"}, Max: batch, Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				if err := q.Ack(ctx, "bench", taskIDs(tasks)...); err != nil {
					b.Fatal(err)
				}
				n += len(tasks)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkEndToEnd: producers (as many as consumers, at most 8) enqueue
// while consumers dequeue and ack; an op is one task through the whole
// cycle. batch is both the enqueue batch and the dequeue Max.
func BenchmarkEndToEnd(b *testing.B) {
	for _, consumers := range []int{1, 50} {
		for _, batch := range []int{1, 50} {
			b.Run(fmt.Sprintf("consumers=%d/batch=%d", consumers, batch), func(b *testing.B) {
				q := benchQueue(b)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var done atomic.Int64
				finished := make(chan struct{})
				var wg sync.WaitGroup
				b.ResetTimer()
				for range consumers {
					wg.Go(func() {
						for {
							tasks, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"bench"}, Max: batch, Lease: time.Minute})
							if err != nil {
								return
							}
							if err := q.Ack(context.Background(), "bench", taskIDs(tasks)...); err != nil {
								b.Error(err)
								return
							}
							if done.Add(int64(len(tasks))) == int64(b.N) {
								close(finished)
							}
						}
					})
				}
				producers := min(consumers, 8)
				var pwg sync.WaitGroup
				for p := range producers {
					pwg.Go(func() {
						items := make([]Item, 0, batch)
						for i := p * batch; i < b.N; i += producers * batch {
							items = items[:0]
							for j := i; j < min(i+batch, b.N); j++ {
								items = append(items, Item{ID: benchID(j)})
							}
							if _, err := q.Enqueue(ctx, "bench", items...); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				pwg.Wait()
				<-finished
				b.StopTimer()
				cancel()
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
			})
		}
	}
}

// BenchmarkLatency: one consumer sleeps in Dequeue; each op enqueues one
// task and measures until Dequeue returns it.
func BenchmarkLatency(b *testing.B) {
	q := benchQueue(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan time.Time)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			tasks, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"bench"}, Lease: time.Minute})
			if err != nil {
				return
			}
			at := time.Now()
			q.Ack(context.Background(), "bench", taskIDs(tasks)...)
			got <- at
		}
	})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		waitForWaiters(b, q, "bench", 1)
		b.StartTimer()
		start := time.Now()
		if _, err := q.Enqueue(ctx, "bench", Item{ID: benchID(i)}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-got).Sub(start))
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkMemory reports Redis memory per pending task: MEMORY USAGE
// summed over the queue's keys for 100,000 ready (and, apart, delayed)
// tasks. The op itself is meaningless; read the bytes/task metrics.
func BenchmarkMemory(b *testing.B) {
	const n = 100000
	for _, state := range []string{"ready", "delayed"} {
		b.Run(state, func(b *testing.B) {
			q := benchQueue(b)
			ctx := context.Background()
			at := time.Time{}
			if state == "delayed" {
				at = time.Now().Add(time.Hour)
			}
			for i := 0; i < n; i += 1000 {
				items := make([]Item, 0, 1000)
				for j := i; j < i+1000; j++ {
					items = append(items, Item{ID: benchID(j), At: at.Add(time.Duration(j) * time.Millisecond)})
					if at.IsZero() {
						items[len(items)-1].At = time.Time{}
					}
				}
				if _, err := q.Enqueue(ctx, "mem", items...); err != nil {
					b.Fatal(err)
				}
			}
			var total, index int64
			iter := q.client.Scan(ctx, 0, q.pattern("mem"), 1000).Iterator()
			for iter.Next(ctx) {
				u, err := q.client.MemoryUsage(ctx, iter.Val(), 0).Result()
				if err != nil {
					b.Fatal(err)
				}
				total += u
				if strings.Contains(iter.Val(), "}:i:") {
					index += u
				}
			}
			if err := iter.Err(); err != nil {
				b.Fatal(err)
			}
			for range b.N {
			}
			b.ReportMetric(float64(total)/n, "bytes/task")
			b.ReportMetric(float64(index)/n, "index-bytes/task")
		})
	}
}

// fill enqueues n tasks in batches.
func fill(b *testing.B, q *Queue, queue string, n int) {
	b.Helper()
	for i := 0; i < n; i += 1000 {
		items := make([]Item, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			items = append(items, Item{ID: benchID(j)})
		}
		if _, err := q.Enqueue(context.Background(), queue, items...); err != nil {
			b.Fatal(err)
		}
	}
}
