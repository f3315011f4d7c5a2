package queue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/queue"
)

// A worker's loop in short: enqueue, dequeue with a lease, ack. Here on
// the embedded miniredis; production passes a client of a real Redis.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	q, err := queue.New(queue.Config{Client: client})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	ctx := context.Background()

	added, _ := q.Enqueue(ctx, "orders",
		queue.Item{ID: "0192f3a4-5b6c-7d8e-9f00-112233445566/reserve/1"},
		queue.Item{ID: "0192f3a4-5b6c-7d8e-9f00-112233445566/reserve/1"}, // a duplicate adds nothing
	)
	fmt.Println("added:", added)

	tasks, err := q.Dequeue(ctx, queue.DequeueParams{Queues: []string{"orders"}, Max: 10, Lease: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	for _, t := range tasks {
		fmt.Printf("run %s (delivery %d)\n", t.ID, t.Deliveries)
		if err := q.Ack(ctx, t.Queue, t.ID); err != nil {
			panic(err)
		}
	}
	stats, _ := q.Stats(ctx, "orders")
	fmt.Printf("%+v\n", stats)
	// Output:
	// added: [true false]
	// run 0192f3a4-5b6c-7d8e-9f00-112233445566/reserve/1 (delivery 1)
	// {Ready:0 Delayed:0 Leased:0 Routed:0 Paused:false}
}
