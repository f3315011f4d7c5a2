package faults

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

// plan is a run's input: it tells the test handlers how to misbehave in
// this run. Maps are by step name; attempt lists say on which attempts
// (forward, or compensation for CompHold) the behaviour applies.
type plan struct {
	N int `json:"n"` // tells runs apart
	// Hold: after the effect, announce "hold" on stdout and then block
	// until the handler's context ends (HoldSleep false) or sleep
	// HoldSleepMS ignoring the context and succeed (HoldSleep true).
	Hold        map[string][]int `json:"hold,omitempty"`
	CompHold    map[string][]int `json:"comp_hold,omitempty"`
	HoldSleep   bool             `json:"hold_sleep,omitempty"`
	HoldSleepMS int              `json:"hold_sleep_ms,omitempty"`
	// SleepMS: work this long (respecting the context) before the effect.
	SleepMS map[string]int `json:"sleep_ms,omitempty"`
	// Panic: panic on every attempt, before the effect.
	Panic []string `json:"panic,omitempty"`
	// Fail: fail permanently, before the effect.
	Fail []string `json:"fail,omitempty"`
	// Retry: fail on these attempts with an error that is retried,
	// before the effect.
	Retry map[string][]int `json:"retry,omitempty"`
	// Kill: SIGKILL the worker process on every attempt, before the effect.
	Kill []string `json:"kill,omitempty"`
	// Mark: put this string in the step's output (the proxy matches it).
	Mark map[string]string `json:"mark,omitempty"`
	// BigOutput: return an output of this many bytes.
	BigOutput map[string]int `json:"big_output,omitempty"`
	// Order is the correlation value of wfParked's wait for evPaid, and
	// WakeAt (RFC 3339) the time its alarm step sleeps until.
	Order  string `json:"order,omitempty"`
	WakeAt string `json:"wake_at,omitempty"`
}

// Effect kinds in the effects table.
const (
	effectDo   = "do"
	effectUndo = "undo"
)

// schemaSQL creates the tables the test handlers write: effects (one row
// per idempotency key and kind; a repeat is counted in deliveries, never
// ignored) and invocations (one row per handler call).
var schemaSQL = []string{
	`CREATE TABLE IF NOT EXISTS effects (
		idem_key VARCHAR(200) NOT NULL,
		kind VARCHAR(16) NOT NULL,
		run_id VARCHAR(64) NOT NULL,
		step VARCHAR(64) NOT NULL,
		first_pid INT NOT NULL,
		first_attempt INT NOT NULL,
		deliveries INT NOT NULL DEFAULT 1,
		created_at DATETIME(6) NOT NULL,
		PRIMARY KEY (idem_key, kind)
	)`,
	`CREATE TABLE IF NOT EXISTS invocations (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		run_id VARCHAR(64) NOT NULL,
		step VARCHAR(64) NOT NULL,
		kind VARCHAR(16) NOT NULL,
		attempt INT NOT NULL,
		pid INT NOT NULL,
		started_at DATETIME(6) NOT NULL,
		finished_at DATETIME(6) NULL,
		outcome VARCHAR(16) NULL,
		KEY (run_id, step)
	)`,
}

// handlers are the test's step handlers; db is the effects database (a
// direct connection: it stands for the outside world, not for dagflow's
// store, and is never proxied).
type handlers struct {
	db  *sql.DB
	pid int
	out func(line string) // announces events to the parent
	mu  sync.Mutex
}

func (h *handlers) announce(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.out(fmt.Sprintf(format, args...))
}

func (h *handlers) invocation(ctx context.Context, sc steps.Context, kind string) int64 {
	res, err := h.db.ExecContext(context.WithoutCancel(ctx), `INSERT INTO invocations (run_id, step, kind, attempt, pid, started_at)
		VALUES (?, ?, ?, ?, ?, ?)`, sc.RunID, sc.Step, kind, sc.Attempt, h.pid, time.Now().UTC())
	if err != nil {
		panic(fmt.Sprintf("faults: record invocation: %v", err)) // the test's own database must work
	}
	id, _ := res.LastInsertId()
	return id
}

func (h *handlers) finish(ctx context.Context, id int64, outcome string) {
	if _, err := h.db.ExecContext(context.WithoutCancel(ctx), `UPDATE invocations SET finished_at = ?, outcome = ? WHERE id = ?`,
		time.Now().UTC(), outcome, id); err != nil {
		panic(fmt.Sprintf("faults: record invocation end: %v", err))
	}
}

// effect is the external effect: an idempotent write keyed by the step's
// idempotency key, like a payment service given the key would make.
func (h *handlers) effect(ctx context.Context, sc steps.Context, kind string) error {
	_, err := h.db.ExecContext(context.WithoutCancel(ctx), `INSERT INTO effects (idem_key, kind, run_id, step, first_pid, first_attempt, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE deliveries = deliveries + 1`,
		sc.IdempotencyKey, kind, sc.RunID, sc.Step, h.pid, sc.Attempt, time.Now().UTC())
	return err
}

func decodePlan(sc steps.Context) plan {
	var p plan
	if len(sc.Input) > 0 {
		_ = json.Unmarshal(sc.Input, &p)
	}
	return p
}

func (h *handlers) forward(ctx context.Context, sc steps.Context) (out json.RawMessage, err error) {
	p := decodePlan(sc)
	id := h.invocation(ctx, sc, effectDo)
	defer func() {
		outcome := "succeeded"
		if r := recover(); r != nil {
			h.finish(ctx, id, "panicked")
			panic(r)
		}
		if err != nil {
			outcome = "failed"
		}
		h.finish(ctx, id, outcome)
	}()
	if slices.Contains(p.Kill, sc.Step) {
		h.announce("kill %s %s %d", sc.RunID, sc.Step, sc.Attempt)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	if d := p.SleepMS[sc.Step]; d > 0 {
		t := time.NewTimer(time.Duration(d) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if slices.Contains(p.Panic, sc.Step) {
		panic(fmt.Sprintf("poison input n=%d", p.N))
	}
	if slices.Contains(p.Fail, sc.Step) {
		return nil, steps.Permanent(errors.New("declined by the test"))
	}
	if slices.Contains(p.Retry[sc.Step], sc.Attempt) {
		return nil, fmt.Errorf("attempt %d declined by the test, to be retried", sc.Attempt)
	}
	if err := h.effect(ctx, sc, effectDo); err != nil {
		return nil, err
	}
	if slices.Contains(p.Hold[sc.Step], sc.Attempt) {
		if err := h.hold(ctx, p, sc, "step"); err != nil {
			return nil, err
		}
	}
	o := map[string]any{"step": sc.Step, "n": p.N, "pid": h.pid}
	if m := p.Mark[sc.Step]; m != "" {
		o["mark"] = m
	}
	if n := p.BigOutput[sc.Step]; n > 0 {
		o["big"] = strings.Repeat("x", n)
	}
	return json.Marshal(o)
}

func (h *handlers) compensate(ctx context.Context, sc steps.Context) (out json.RawMessage, err error) {
	p := decodePlan(sc)
	id := h.invocation(ctx, sc, effectUndo)
	defer func() {
		outcome := "succeeded"
		if err != nil {
			outcome = "failed"
		}
		h.finish(ctx, id, outcome)
	}()
	if err := h.effect(ctx, sc, effectUndo); err != nil {
		return nil, err
	}
	if slices.Contains(p.CompHold[sc.Step], sc.Attempt) {
		if err := h.hold(ctx, p, sc, "compensation"); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// hold announces that the effect is done and the handler is about to
// return, so that the parent can kill, stop or signal this process at
// exactly this point.
func (h *handlers) hold(ctx context.Context, p plan, sc steps.Context, kind string) error {
	h.announce("hold %s %s %s %d", sc.RunID, sc.Step, kind, sc.Attempt)
	if p.HoldSleep {
		// A zombie: it sleeps through its lease (while SIGSTOPped) and
		// then returns as if nothing happened.
		time.Sleep(time.Duration(p.HoldSleepMS) * time.Millisecond)
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// Names of the test workflows.
const (
	wfChain  = "chain"  // a -> b -> c -> d; a, b, c compensate
	wfCrashy = "crashy" // k1 -> k2; k1 compensates; many attempts allowed
	wfTyped  = "typed"  // t, a typed step taking an order
	// wfEvented is e1 -> e2 (e1 compensates), started by every
	// "fault.order" event (events_test.go).
	wfEvented = "evented"
	// wfParent is one child step, sub, starting a crashy run with the
	// parent's input (child_test.go).
	wfParent = "parent"
	evOrder  = "fault.order"
	// wfParked is a (compensated), then four parked steps side by side:
	// nap sleeps parkedNap, alarm sleeps until input.wake_at, paid waits
	// for evPaid correlated by input.order (timing out after
	// parkedTimeout, twice), approve waits for a signal; then ship and
	// done (waits_test.go). wfParkedShort is the same with paid timing
	// out after parkedShortTimeout.
	wfParked           = "parked"
	wfParkedShort      = "parked-short"
	evPaid             = "fault.paid"
	parkedNap          = 5 * time.Second
	parkedTimeout      = time.Minute
	parkedShortTimeout = 3 * time.Second
)

// order is the typed step's input.
type order struct {
	Qty int `json:"qty"`
}

// workflows builds the test workflows on h (nil: handlers that are never
// called, for a node that only triggers).
func workflows(h *handlers) ([]*dag.Workflow, error) {
	if h == nil {
		h = &handlers{}
	}
	fwd := steps.HandlerFunc(h.forward)
	comp := steps.HandlerFunc(h.compensate)
	retry := dag.RetryPolicy{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Multiplier: 2, Jitter: dag.NoJitter}
	chain, err := dag.New(wfChain, dag.DefaultRetry(retry), dag.DefaultTimeout(time.Minute)).
		Step("a", fwd, dag.Compensate(comp)).
		Step("b", fwd, dag.After("a"), dag.Compensate(comp)).
		Step("c", fwd, dag.After("b"), dag.Compensate(comp)).
		Step("d", fwd, dag.After("c")).
		Build()
	if err != nil {
		return nil, err
	}
	retry.MaxAttempts = 50
	crashy, err := dag.New(wfCrashy, dag.DefaultRetry(retry), dag.DefaultTimeout(time.Minute)).
		Step("k1", fwd, dag.Compensate(comp)).
		Step("k2", fwd, dag.After("k1")).
		Build()
	if err != nil {
		return nil, err
	}
	typed, err := dag.New(wfTyped, dag.DefaultRetry(retry)).
		Step("t", steps.Typed(func(ctx context.Context, sc steps.Context, in order) (order, error) {
			return in, h.effect(ctx, sc, effectDo)
		})).
		Build()
	if err != nil {
		return nil, err
	}
	evented, err := dag.New(wfEvented, dag.DefaultRetry(retry), dag.DefaultTimeout(time.Minute), dag.OnEvent(evOrder)).
		Step("e1", fwd, dag.Compensate(comp)).
		Step("e2", fwd, dag.After("e1")).
		Build()
	if err != nil {
		return nil, err
	}
	limited, err := dag.New(wfLimited, dag.DefaultRetry(retry)).
		Step("slow", steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			h.announce("limited %s", sc.RunID)
			select {
			case <-time.After(limitedStep):
				return json.RawMessage(`{}`), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}), dag.Queue(limitedQueue)).
		Build()
	if err != nil {
		return nil, err
	}
	parked, err := parkedWorkflow(wfParked, parkedTimeout, fwd, comp, retry)
	if err != nil {
		return nil, err
	}
	parkedShort, err := parkedWorkflow(wfParkedShort, parkedShortTimeout, fwd, comp, retry)
	if err != nil {
		return nil, err
	}
	parent, err := dag.New(wfParent, dag.DefaultRetry(retry)).
		Step("sub", nil, dag.Child(wfCrashy)).
		Build()
	if err != nil {
		return nil, err
	}
	return []*dag.Workflow{chain, crashy, typed, evented, limited, parked, parkedShort, parent}, nil
}

// parkedWorkflow builds wfParked's shape, its wait for evPaid timing out
// after timeout.
func parkedWorkflow(name string, timeout time.Duration, fwd, comp steps.Handler, retry dag.RetryPolicy) (*dag.Workflow, error) {
	return dag.New(name, dag.DefaultRetry(retry), dag.DefaultTimeout(time.Minute)).
		Step("a", fwd, dag.Compensate(comp)).
		Step("nap", nil, dag.After("a"), dag.Sleep(parkedNap)).
		Step("alarm", nil, dag.After("a"), dag.SleepUntil("input.wake_at")).
		Step("paid", nil, dag.After("a"), dag.WaitFor(evPaid, dag.Correlate("input.order"), dag.WaitTimeout(timeout)),
			dag.Retry(dag.RetryPolicy{MaxAttempts: 2, InitialBackoff: 200 * time.Millisecond, Multiplier: 1, Jitter: dag.NoJitter})).
		Step("approve", nil, dag.After("a"), dag.WaitForSignal()).
		Step("ship", fwd, dag.After("nap", "alarm", "paid", "approve")).
		Step("done", fwd, dag.After("ship")).
		Build()
}
