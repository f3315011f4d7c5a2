// Command order is dagflow's order-processing example: it declares the
// order workflow in Go (examples/orderflow), runs an engine, places a few
// orders and prints what happened to each.
//
// By default it runs on the embedded backends (an in-process Redis and a
// SQLite file). With -mysql-dsn and -redis-addr (or DAGFLOW_MYSQL_DSN and
// DAGFLOW_REDIS_ADDR) it runs on real servers:
//
//	go run ./examples/order
//	go run ./examples/order -mysql-dsn 'root@tcp(127.0.0.1:3306)/dagflow' -redis-addr 127.0.0.1:6379
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
)

func main() {
	mysqlDSN := flag.String("mysql-dsn", os.Getenv("DAGFLOW_MYSQL_DSN"), "MySQL DSN (empty: embedded SQLite)")
	redisAddr := flag.String("redis-addr", os.Getenv("DAGFLOW_REDIS_ADDR"), "Redis address (empty: in-process Redis)")
	flag.Parse()
	ctx := context.Background()

	var store persistence.Store
	var err error
	if *mysqlDSN != "" {
		store, err = mysql.Open(ctx, mysql.Config{DSN: *mysqlDSN, AutoMigrate: true})
	} else {
		store, err = sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(os.TempDir(), "dagflow-order-example.db"), AutoMigrate: true})
	}
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	addr := *redisAddr
	if addr == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			log.Fatal(err)
		}
		defer mr.Close()
		addr = mr.Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	svc := orderflow.NewServices()
	wf, err := svc.Workflow("order_example")
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: store, Redis: rdb, Prefix: "dagflow-example"})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Register(wf); err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(context.Background())

	stamp := time.Now().UTC().Format("150405")
	orders := []orderflow.Order{
		{OrderID: stamp + "-A", Customer: "ada@example.com", SKU: "BOOK-1", Quantity: 2, Total: 120},
		{OrderID: stamp + "-B", Customer: "bob@example.com", SKU: "PEN-9", Quantity: 1, Total: 15},
		{OrderID: stamp + "-C", Customer: "cy@example.com", SKU: "LAMP-3", Quantity: 1, Total: 300, FailStep: "ship"},
	}
	for _, o := range orders {
		// The order id is the idempotency key: placing the same order
		// twice starts one run.
		id, err := e.Trigger(ctx, "order_example", o, engine.IdempotencyKey(o.OrderID))
		if err != nil {
			log.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		run, err := e.Wait(wctx, id)
		cancel()
		if err != nil {
			log.Fatal(err)
		}
		info, err := e.Get(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("order %s (total %.0f): run %s %s\n", o.OrderID, o.Total, id, run.Status)
		for _, s := range info.Steps {
			fmt.Printf("    %-8s %s\n", s.Step, s.Status)
		}
	}
	fmt.Println("effects:")
	for _, eff := range svc.Effects() {
		fmt.Println("    " + eff)
	}
}
