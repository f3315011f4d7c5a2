package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
)

// Mount the API in front of an engine, make an API key, and start a run
// over HTTP with the Go client.
func ExampleNewHandler() {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: ":memory:", AutoMigrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rc.Close()

	e, err := engine.New(engine.Config{Store: st, Redis: rc})
	if err != nil {
		log.Fatal(err)
	}
	hello := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		return json.RawMessage(`"hello"`), nil
	})
	wf, err := dag.New("greet").Step("hello", hello).Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Register(wf); err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)

	// The secret is shown once; the store keeps its SHA-256.
	secret, _, err := api.CreateKey(ctx, st, "ci", "operate", time.Now())
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(e, api.Options{}))
	defer srv.Close()

	c, err := client.New(srv.URL, client.Options{Key: secret})
	if err != nil {
		log.Fatal(err)
	}
	run, created, err := c.Trigger(ctx, "greet", client.TriggerRequest{IdempotencyKey: "greet-1"})
	if err != nil {
		log.Fatal(err)
	}
	again, created2, err := c.Trigger(ctx, "greet", client.TriggerRequest{IdempotencyKey: "greet-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", created, "repeat created:", created2, "same run:", again.ID == run.ID)
	if _, err := e.Wait(ctx, run.ID); err != nil {
		log.Fatal(err)
	}
	d, err := c.GetRun(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Run.Status, string(d.Output))

	_, err = c.GetRun(ctx, "0190a0b0-0000-7000-8000-000000000000")
	if p, ok := client.AsProblem(err); ok {
		fmt.Println(p.Status, p.Code)
	}
	// Output:
	// created: true repeat created: false same run: true
	// succeeded {"hello":"hello"}
	// 404 run_not_found
}
