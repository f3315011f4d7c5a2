package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
)

// An engine on the embedded backends (an in-process Redis and a SQLite
// file) runs a two-step workflow; the second step reads the first's output.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "dagflow-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "dagflow.db"), AutoMigrate: true})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	type Order struct {
		ID string `json:"id"`
	}
	type Reservation struct {
		Warehouse string `json:"warehouse"`
	}
	reserve := steps.Typed(func(ctx context.Context, sc steps.Context, o Order) (Reservation, error) {
		return Reservation{Warehouse: "EU"}, nil
	})
	ship := steps.Typed(func(ctx context.Context, sc steps.Context, o Order) (string, error) {
		var r Reservation
		if err := sc.DecodeOutput("reserve", &r); err != nil {
			return "", err
		}
		return fmt.Sprintf("order %s ships from %s", o.ID, r.Warehouse), nil
	})
	wf, err := dag.New("order").
		Step("reserve", reserve).
		Step("ship", ship, dag.After("reserve")).
		Build()
	if err != nil {
		panic(err)
	}

	e, err := engine.New(engine.Config{
		Store: store, Redis: rdb,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		panic(err)
	}
	if err := e.Register(wf); err != nil {
		panic(err)
	}
	if err := e.Start(ctx); err != nil {
		panic(err)
	}
	defer e.Stop(ctx)

	id, err := e.Trigger(ctx, "order", Order{ID: "A-1"}, engine.IdempotencyKey("order:A-1"))
	if err != nil {
		panic(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	run, err := e.Wait(wctx, id)
	if err != nil {
		panic(err)
	}
	info, err := e.Get(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status)
	fmt.Println(string(info.Output()))
	// Output:
	// succeeded
	// {"ship":"order A-1 ships from EU"}
}

// Workflows subscribed to an event start when it is published: once per
// event id, however often it is published, and only where the filter
// matches.
func ExampleEngine_Publish() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "dagflow-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "dagflow.db"), AutoMigrate: true})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	type Order struct {
		ID    string  `json:"id"`
		Total float64 `json:"total"`
	}
	ship := steps.Typed(func(ctx context.Context, sc steps.Context, o Order) (string, error) {
		return "shipped " + o.ID, nil
	})
	shipping, err := dag.New("ship", dag.OnEvent("order.placed", dag.Filter("event.total >= 100"))).
		Step("ship", ship).Build()
	if err != nil {
		panic(err)
	}
	e, err := engine.New(engine.Config{
		Store: store, Redis: rdb,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		panic(err)
	}
	if err := e.Register(shipping); err != nil {
		panic(err)
	}
	if err := e.Start(ctx); err != nil {
		panic(err)
	}
	defer e.Stop(ctx)

	p, err := e.Publish(ctx, "order.placed", Order{ID: "A-1", Total: 120}, engine.EventID("order:A-1"))
	if err != nil {
		panic(err)
	}
	again, err := e.Publish(ctx, "order.placed", Order{ID: "A-1", Total: 120}, engine.EventID("order:A-1"))
	if err != nil {
		panic(err)
	}
	small, err := e.Publish(ctx, "order.placed", Order{ID: "A-2", Total: 5}, engine.EventID("order:A-2"))
	if err != nil {
		panic(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	run, err := e.Wait(wctx, p.Runs[0].RunID)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Runs[0].Workflow, run.Status)
	fmt.Println("repeat created:", again.Created, "same run:", again.Runs[0].RunID == p.Runs[0].RunID)
	fmt.Println("runs for a small order:", len(small.Runs))
	// Output:
	// ship succeeded
	// repeat created: false same run: true
	// runs for a small order: 0
}
