package engine_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/codec/aesgcm"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// Markers of the private data in the order runs below: none may be
// found anywhere in the store once the codec encrypts payloads.
var privateMarkers = []string{
	"MRKORDER",           // order ids: in the input, every output, ship's error
	"mrk.customer",       // the customer's address: input only
	"4111-MRK-1111-1111", // a card number: input only
}

// orderOnYAML loads the order workflow of workflows.FS with the example's
// services.
func orderOnYAML(t *testing.T) *dag.Workflow {
	t.Helper()
	reg := steps.NewRegistry()
	if err := orderflow.NewServices().Register(reg); err != nil {
		t.Fatal(err)
	}
	ws, err := dag.LoadFS(workflows.FS, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.Name() == "order" {
			return w
		}
	}
	t.Fatal("workflows.FS has no order workflow")
	return nil
}

func testCodec(t *testing.T) *aesgcm.Codec {
	t.Helper()
	c, err := aesgcm.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{7}, aesgcm.KeySize)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func order(id string, failStep string) map[string]any {
	return map[string]any{
		"order_id": id, "customer": "mrk.customer." + id + "@example.com", "sku": "SKU-1", "quantity": 2,
		"total": 250.0, "fail_step": failStep, "card": "4111-MRK-1111-1111",
	}
}

// With an AES-GCM codec the order workflow runs as without one (its
// when condition and its compensations see decoded data; idempotent
// triggers still match), the engine's API returns decoded payloads, and
// no text or blob of any table holds a marker of the inputs, outputs or
// errors.
func TestCodecKeepsPayloadsOutOfTheStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{orderOnYAML(t)}
		o.Configure = func(c *engine.Config) { c.Codec = testCodec(t) }
		env := enginetest.New(t, o)
		ctx := context.Background()

		okID := env.Trigger(t, "order", order("MRKORDER-A", ""), engine.IdempotencyKey("CONTROL-KEY-A"))
		failID := env.Trigger(t, "order", order("MRKORDER-B", "ship"))
		ok := env.Wait(t, okID)
		env.AssertRun(t, ok, persistence.RunSucceeded)
		env.AssertStep(t, ok, "points", persistence.StepSucceeded) // when: input.total >= 100
		failed := env.Wait(t, failID)
		env.AssertRun(t, failed, persistence.RunCompensated)
		env.AssertStep(t, failed, "reserve", persistence.StepCompensated) // release read reserve's output
		env.AssertStep(t, failed, "points", persistence.StepCompensated)

		// The engine's API gives the payloads back decoded.
		var in map[string]any
		if err := json.Unmarshal(ok.Run.Input, &in); err != nil || in["order_id"] != "MRKORDER-A" {
			t.Errorf("Get: input %s (%v), want the order decoded", ok.Run.Input, err)
		}
		if s, _ := ok.Step("ship"); !strings.Contains(string(s.Output), `"trk-MRKORDER-A"`) {
			t.Errorf("Get: ship output %s, want it decoded", s.Output)
		}
		if s, _ := failed.Step("ship"); s.Error != "ship refused order MRKORDER-B" {
			t.Errorf("Get: ship error %q, want it decoded", s.Error)
		}
		if !strings.Contains(failed.Run.Error, "ship refused order MRKORDER-B") {
			t.Errorf("Get: run error %q, want it decoded", failed.Run.Error)
		}
		for _, a := range failed.Attempts {
			if a.Step == "ship" && a.Error != "ship refused order MRKORDER-B" {
				t.Errorf("Get: ship attempt %d error %q, want it decoded", a.Attempt, a.Error)
			}
		}
		run, err := env.Engine.Wait(ctx, okID)
		if err != nil || !bytes.Equal(run.Input, ok.Run.Input) {
			t.Errorf("Wait: input %s (%v), want %s", run.Input, err, ok.Run.Input)
		}
		page, err := env.Engine.Runs(ctx, engine.RunFilter{Workflow: "order"})
		if err != nil || len(page.Runs) != 2 {
			t.Fatalf("Runs: %d runs, %v", len(page.Runs), err)
		}
		for _, r := range page.Runs {
			if !bytes.Contains(r.Input, []byte(`"MRKORDER-`)) {
				t.Errorf("Runs: run %s input %s, want it decoded", r.ID, r.Input)
			}
		}
		dead, err := env.Engine.DeadLetters(ctx, persistence.StepListDeadParams{})
		if err != nil || len(dead.Steps) != 1 || dead.Steps[0].Error != "ship refused order MRKORDER-B" {
			t.Errorf("DeadLetters: %+v, %v; want ship with its error decoded", dead.Steps, err)
		}

		// An idempotent repeat with the same input is the same run, though
		// its encryption differs; another input is still a conflict.
		again, err := env.Engine.Trigger(ctx, "order", order("MRKORDER-A", ""), engine.IdempotencyKey("CONTROL-KEY-A"))
		if err != nil || again != okID {
			t.Errorf("repeat with the same input: %s, %v; want run %s", again, err, okID)
		}
		_, err = env.Engine.Trigger(ctx, "order", order("MRKORDER-C", ""), engine.IdempotencyKey("CONTROL-KEY-A"))
		if !errors.Is(err, persistence.ErrIdempotencyConflict) {
			t.Errorf("repeat with another input: err = %v, want ErrIdempotencyConflict", err)
		}

		found := scanStore(t, env.Store, append([]string{"CONTROL-KEY-A"}, privateMarkers...))
		if len(found["CONTROL-KEY-A"]) == 0 {
			t.Fatal("the scan did not find the idempotency key, which is stored in clear: it reads nothing")
		}
		for _, m := range privateMarkers {
			if len(found[m]) > 0 {
				t.Errorf("plaintext %q found in the store at %s", m, strings.Join(found[m], ", "))
			}
		}
		for _, m := range privateMarkers {
			if keys := scanRedis(t, env.Redis, env.Prefix, m); len(keys) > 0 {
				t.Errorf("plaintext %q found in Redis at %s", m, strings.Join(keys, ", "))
			}
		}
	})
}

// scanRedis returns the keys under prefix whose name or value holds
// marker.
func scanRedis(t *testing.T, c redis.UniversalClient, prefix, marker string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("redis scan: %v", err)
	}
	if len(keys) == 0 {
		t.Fatalf("no Redis keys under %q: the scan reads nothing", prefix)
	}
	var hits []string
	for _, k := range keys {
		var val any
		switch typ := c.Type(ctx, k).Val(); typ {
		case "string":
			val = c.Get(ctx, k).Val()
		case "list":
			val = c.LRange(ctx, k, 0, -1).Val()
		case "set":
			val = c.SMembers(ctx, k).Val()
		case "zset":
			val = c.ZRange(ctx, k, 0, -1).Val()
		case "hash":
			val = c.HGetAll(ctx, k).Val()
		case "stream":
			val = c.XRange(ctx, k, "-", "+").Val()
		default:
			t.Fatalf("redis key %s has type %q, which the scan does not read", k, typ)
		}
		if strings.Contains(k+fmt.Sprint(val), marker) {
			hits = append(hits, k)
		}
	}
	return hits
}

// scanStore reads every column of every row of every table of the
// store's database and returns, for each marker, where it was found
// (table.column).
func scanStore(t *testing.T, st persistence.Store, markers []string) map[string][]string {
	t.Helper()
	ts, ok := st.(persistence.TxStore)
	if !ok {
		t.Fatalf("store %T has no database to scan", st)
	}
	db := ts.DB()
	tables := queryStrings(t, db, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if tables == nil {
		tables = queryStrings(t, db, `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()`)
	}
	if len(tables) < 4 {
		t.Fatalf("found tables %v: not the store's", tables)
	}
	found := map[string][]string{}
	for _, table := range tables {
		rows, err := db.Query("SELECT * FROM " + table)
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("scan %s: %v", table, err)
			}
			for i, v := range vals {
				text := fmt.Sprint(v)
				if b, ok := v.([]byte); ok {
					text = string(b)
				}
				for _, m := range markers {
					if strings.Contains(text, m) {
						found[m] = append(found[m], table+"."+cols[i])
					}
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		rows.Close()
	}
	return found
}

// queryStrings returns a one-column query's values, or nil when the query
// fails (the other database's catalogue).
func queryStrings(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}
