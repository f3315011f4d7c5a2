package setups

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// orderRuns is how many order runs each setup runs.
const orderRuns = 20

// setup is what one production setup hands the order runs.
type setup struct {
	store  persistence.Store
	redis  redis.UniversalClient
	prefix string // Redis key prefix; default testenv.KeyPrefix
	// concurrency is the engine's Concurrency; default the engine's.
	concurrency int
	// idle keeps the engine running, idle, this long after the runs
	// finished: what an idle node sends to Redis (go-redis's pub/sub
	// health check) happens in the test too.
	idle time.Duration
	// midRun, when set, is called (on another goroutine) once runs are
	// under way, while more are triggered: a failover. It may not call
	// t.Fatal.
	midRun func()
}

// runOrders runs orderRuns order runs on one engine node, as `dagflow
// worker` builds it (the bundled workflows, the order example's
// handlers), and checks that every run succeeded, every step succeeded
// (points is skipped for orders under 100) exactly once by the store's
// attempts, and every effect happened once.
func runOrders(t *testing.T, s setup) {
	t.Helper()
	if s.prefix == "" {
		s.prefix = testenv.KeyPrefix(t)
	}
	reg := steps.NewRegistry()
	svc := orderflow.NewServices()
	svc.Delay = 20 * time.Millisecond
	if s.midRun != nil {
		// Steps outlast the pace of triggers, so runs overlap, slots
		// fill, and ready steps wait in Redis across the event.
		svc.Delay = 200 * time.Millisecond
	}
	if err := svc.Register(reg); err != nil {
		t.Fatal(err)
	}
	e := startNode(t, s, reg, nil)
	ctx := context.Background()
	var err error
	ids := make([]string, orderRuns)
	var claimed int64 // steps claimed from Redis tasks when the event ended
	trigger := func(i int) {
		o := orderflow.Order{OrderID: fmt.Sprintf("o-%d", i), Customer: "c@example.com", SKU: "sku-1", Quantity: 1, Total: float64(50 + 10*i)}
		if ids[i], err = e.Trigger(ctx, "order", o); err != nil {
			t.Fatalf("trigger %d: %v", i, err)
		}
	}
	if s.midRun == nil {
		for i := range ids {
			trigger(i)
		}
	} else {
		// A quarter of the runs first; once they are under way, the
		// event, while the rest are triggered over the next 3 seconds:
		// runs are in every state while it happens, and steps are still
		// taken from Redis after it.
		for i := range orderRuns / 4 {
			trigger(i)
		}
		testenv.Eventually(t, 30*time.Second, func() bool { return svc.Count("reserve") >= 2 }, "the first runs under way")
		done := make(chan struct{})
		shipped := 0
		go func() {
			defer close(done)
			s.midRun()
			claimed, shipped = e.Stats().ClaimItems, svc.Count("ship")
		}()
		for i := orderRuns / 4; i < orderRuns; i++ {
			time.Sleep(3 * time.Second / orderRuns)
			trigger(i)
		}
		<-done
		t.Logf("when the event ended, %d of %d runs had shipped", shipped, orderRuns)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	points := 0
	for i, id := range ids {
		run, err := e.Wait(wctx, id)
		if err != nil {
			t.Fatalf("run %d (%s) did not finish: %v", i, id, err)
		}
		if run.Status != persistence.RunSucceeded {
			t.Errorf("run %d (%s): %s (%s), want succeeded", i, id, run.Status, run.Error)
		}
		if checkSteps(t, s.store, id) {
			points++
		}
	}
	if st := e.Stats(); s.midRun != nil {
		t.Logf("steps claimed from Redis tasks after the event: %d (%d before); Redis errors %d; tasks reconciled %d",
			st.ClaimItems-claimed, claimed, st.RedisErrors, st.Reconciled)
		if st.ClaimItems == claimed {
			t.Error("no step was taken from Redis after the event: the test did not exercise the setup after it")
		}
	}
	time.Sleep(s.idle)
	for kind, want := range map[string]int{"reserve": orderRuns, "notify": orderRuns, "points": points, "ship": orderRuns, "release": 0, "revoke_points": 0} {
		if got := svc.Count(kind); got != want {
			t.Errorf("%d %s effects, want %d", got, kind, want)
		}
	}
}

// startNode starts an engine node of s, as `dagflow worker` builds it
// (the bundled workflows, with the handlers of reg), calls declare (if
// set) before it starts, and stops it when the test ends.
func startNode(t *testing.T, s setup, reg *steps.Registry, declare func(*engine.Engine) error) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{
		Store: s.store, Redis: s.redis, Prefix: s.prefix, Logger: testLogger(t),
		Concurrency: s.concurrency, ReconcileInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadWorkflows(workflows.FS, reg); err != nil {
		t.Fatal(err)
	}
	if declare != nil {
		if err := declare(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("engine start: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Stop(sctx); err != nil {
			t.Errorf("engine stop: %v", err)
		}
	})
	return e
}

// checkSteps checks that each step of the run succeeded once (points may
// be skipped) and has exactly one succeeded attempt, and reports whether
// points ran.
func checkSteps(t *testing.T, st persistence.Store, runID string) (points bool) {
	t.Helper()
	ctx := context.Background()
	sts, err := st.StepList(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := st.AttemptList(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]int{}
	var others []string
	for _, a := range atts {
		if a.Kind != persistence.AttemptForward {
			others = append(others, fmt.Sprintf("%s %s #%d %s", a.Kind, a.Step, a.Attempt, a.Outcome))
			continue
		}
		switch a.Outcome {
		case persistence.OutcomeSucceeded, persistence.OutcomeSkipped:
			done[a.Step]++
		default:
			others = append(others, fmt.Sprintf("%s #%d %s %s", a.Step, a.Attempt, a.Outcome, a.Error))
		}
	}
	for _, s := range sts {
		ok := s.Status == persistence.StepSucceeded || (s.Step == "points" && s.Status == persistence.StepSkipped)
		if !ok {
			t.Errorf("run %s: step %s is %s (%s)", runID, s.Step, s.Status, s.Error)
		}
		if done[s.Step] != 1 {
			t.Errorf("run %s: step %s has %d succeeded attempts, want 1", runID, s.Step, done[s.Step])
		}
		if s.Step == "points" && s.Status == persistence.StepSucceeded {
			points = true
		}
	}
	if len(others) > 0 {
		t.Logf("run %s: other attempts: %s", runID, strings.Join(others, "; "))
	}
	return points
}

// skipShort skips a test that starts servers under -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts its own servers; skipped under -short")
	}
}

// sharedStore opens a migrated store on a private database of the shared
// MariaDB, for the Redis setups.
func sharedStore(t *testing.T) persistence.Store {
	t.Helper()
	st, err := mysql.Open(context.Background(), mysql.Config{DSN: testenv.MySQLDatabase(t), AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// testLogger logs the engine's warnings and errors into the test's log,
// until the test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return io.Discard.Write(p)
	}
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}
