package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// freezableStore refuses every heartbeat once frozen: the node's steps
// keep running but their leases run out, as a node that was SIGKILLed or
// frozen sees them from the outside (and its Redis lease is extended only
// after the store's, so that one runs out too).
type freezableStore struct {
	persistence.Store
	frozen atomic.Bool
}

func (f *freezableStore) StepHeartbeat(ctx context.Context, p persistence.StepHeartbeatParams) error {
	if f.frozen.Load() {
		return errors.New("node frozen")
	}
	return f.Store.StepHeartbeat(ctx, p)
}

// spanAttr returns the value of key among a span's attributes.
func spanAttr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spanString(s sdktrace.ReadOnlySpan, key string) string {
	v, _ := spanAttr(s, key)
	return v.String()
}

// TestTracingOneTraceAcrossNodes: a run whose steps ran on two nodes, one
// of them lost mid-step, is one trace: the caller's span, the trigger
// span (PRODUCER, child of the caller), every attempt (CONSUMER, child of
// the trigger span), the lost one included (recorded by the node that
// took it over), each retry linked to the attempt before, the
// compensation, and the commit of the success.
func TestTracingOneTraceAcrossNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		opts := b.opts(t)
		if opts.Store == nil {
			opts.Store = sqliteStore(t)
		}
		exp := tracetest.NewInMemoryExporter()
		provider := func() *sdktrace.TracerProvider {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			t.Cleanup(func() { tp.Shutdown(context.Background()) })
			return tp
		}
		tpA, tpB, tpCaller := provider(), provider(), provider()

		// The handlers check that their context carries their attempt's
		// span, in the caller's trace, and that the trace keys stay out
		// of the metadata they see.
		var handlerErrs []string
		var mu sync.Mutex
		check := func(ctx context.Context, sc steps.Context) {
			mu.Lock()
			defer mu.Unlock()
			if !trace.SpanContextFromContext(ctx).IsValid() {
				handlerErrs = append(handlerErrs, fmt.Sprintf("%s attempt %d: no span in the handler's context", sc.Step, sc.Attempt))
			}
			if _, ok := sc.Metadata[engine.MetadataTraceparent]; ok || sc.Metadata["tenant"] != "acme" || len(sc.Metadata) != 1 {
				handlerErrs = append(handlerErrs, fmt.Sprintf("%s attempt %d: metadata %v, want only tenant=acme", sc.Step, sc.Attempt, sc.Metadata))
			}
		}
		ok := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			check(ctx, sc)
			return json.RawMessage(`{"ok":true}`), nil
		})
		entered, release := make(chan struct{}), make(chan struct{})
		st := &freezableStore{Store: opts.Store}
		var once sync.Once
		payA := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			check(ctx, sc)
			st.frozen.Store(true) // the node is gone from here on
			once.Do(func() { close(entered) })
			<-release // a handler stuck in a call that takes no context
			return nil, nil
		})
		payB := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			check(ctx, sc)
			sc.Logger.InfoContext(ctx, "card declined")
			return nil, fmt.Errorf("card declined on attempt %d", sc.Attempt)
		})
		workflow := func(pay steps.Handler) *dag.Workflow {
			wf, err := dag.New("traced", dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 3, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Multiplier: 1, Jitter: dag.NoJitter})).
				Step("reserve", ok, dag.Compensate(ok)).
				Step("pay", pay, dag.After("reserve")).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			return wf
		}
		cfg := func(tp trace.TracerProvider, reconcile time.Duration, logger *slog.Logger) func(*engine.Config) {
			return func(c *engine.Config) {
				c.TracerProvider = tp
				c.Concurrency = 1
				c.Lease = 2 * time.Second
				c.Heartbeat = 300 * time.Millisecond
				c.ReconcileInterval = reconcile
				c.ScheduleInterval = -1
				if logger != nil {
					c.Logger = logger
				}
			}
		}
		a := enginetest.New(t, enginetest.Options{Store: st, Redis: opts.Redis, Prefix: opts.Prefix, Clock: engine.SystemClock,
			Workflows: []*dag.Workflow{workflow(payA)}, Configure: cfg(tpA, -1, nil)})
		t.Cleanup(func() { close(release) }) // before a's Stop, which waits for the handler

		ctx, caller := tpCaller.Tracer("test").Start(context.Background(), "place order")
		id, err := a.Engine.Trigger(ctx, "traced", map[string]int{"order": 1}, engine.Metadata(map[string]string{"tenant": "acme"}))
		caller.End()
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-entered:
		case <-time.After(20 * time.Second):
			t.Fatal("pay never started on node a")
		}
		var logs syncBuffer
		logger := slog.New(engine.TraceLogHandler(slog.NewJSONHandler(&logs, nil)))
		bEnv := enginetest.New(t, enginetest.Options{Store: opts.Store, Redis: a.Redis, Prefix: a.Prefix, Clock: engine.SystemClock,
			Workflows: []*dag.Workflow{workflow(payB)}, Configure: cfg(tpB, 100*time.Millisecond, logger)})
		bEnv.AssertRun(t, bEnv.WaitTimeout(t, id, 30*time.Second), persistence.RunCompensated)

		name := func(s sdktrace.ReadOnlySpan) string { return s.Name() }
		var spans []sdktrace.ReadOnlySpan
		testenv.Eventually(t, 10*time.Second, func() bool {
			spans = exp.GetSpans().Snapshots()
			n := 0
			for _, s := range spans {
				if strings.HasPrefix(name(s), "dagflow.compensate") {
					n++
				}
			}
			return n == 1
		}, "the compensation's span never ended")

		traceID := caller.SpanContext().TraceID()
		byName := map[string][]sdktrace.ReadOnlySpan{}
		for _, s := range spans {
			if s.Name() == "dagflow.commit" {
				// A transaction of many runs' outcomes: a trace of its own.
				byName[s.Name()] = append(byName[s.Name()], s)
				continue
			}
			if s.SpanContext().TraceID() != traceID {
				t.Errorf("span %q (%s) is in trace %s, want the caller's %s", s.Name(), spanString(s, "dagflow.outcome"), s.SpanContext().TraceID(), traceID)
			}
			byName[s.Name()] = append(byName[s.Name()], s)
		}
		one := func(n string) sdktrace.ReadOnlySpan {
			t.Helper()
			if len(byName[n]) != 1 {
				t.Fatalf("%d spans named %q, want 1; all: %v", len(byName[n]), n, spanNames(spans))
			}
			return byName[n][0]
		}
		trig := one("dagflow.trigger traced")
		if trig.SpanKind() != trace.SpanKindProducer || trig.Parent().SpanID() != caller.SpanContext().SpanID() {
			t.Errorf("trigger span: kind %v, parent %s; want producer, child of the caller %s", trig.SpanKind(), trig.Parent().SpanID(), caller.SpanContext().SpanID())
		}
		if got := spanString(trig, "dagflow.run_id"); got != id {
			t.Errorf("trigger span run id %q, want %q", got, id)
		}
		nodeA, nodeB := a.Engine.NodeID(), bEnv.Engine.NodeID()
		childOfTrigger := func(s sdktrace.ReadOnlySpan) {
			t.Helper()
			if s.Parent().SpanID() != trig.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("span %q attempt %s: kind %v, parent %s; want consumer, child of the trigger span %s",
					s.Name(), spanString(s, "dagflow.attempt"), s.SpanKind(), s.Parent().SpanID(), trig.SpanContext().SpanID())
			}
		}
		reserve := one("dagflow.step traced/reserve")
		childOfTrigger(reserve)
		for k, want := range map[string]string{
			"dagflow.run_id": id, "dagflow.step": "reserve", "dagflow.attempt": "1", "dagflow.queue": "default",
			"dagflow.node": nodeA, "dagflow.outcome": "succeeded", "messaging.system": "dagflow",
			"messaging.operation.type": "process", "messaging.destination.name": "default",
		} {
			if got := spanString(reserve, k); got != want {
				t.Errorf("reserve span: %s = %q, want %q", k, got, want)
			}
		}
		if spanString(reserve, "messaging.message.id") == "" {
			t.Errorf("reserve span has no messaging.message.id")
		}
		// reserve's success was recorded by a completion transaction:
		// its span links to the attempt, and the attempt back to it.
		var commit sdktrace.ReadOnlySpan
		for _, c := range byName["dagflow.commit"] {
			for _, l := range c.Links() {
				if l.SpanContext.SpanID() == reserve.SpanContext().SpanID() {
					commit = c
				}
			}
		}
		if commit == nil {
			t.Fatalf("no dagflow.commit span links to the reserve attempt; commit spans: %d", len(byName["dagflow.commit"]))
		}
		if v, _ := spanAttr(commit, "dagflow.commit.batch_size"); v.AsInt64() < 1 || spanString(commit, "dagflow.node") != nodeA || commit.Status().Code == codes.Error {
			t.Errorf("commit span: batch size %v node %q status %v; want at least 1, %q, ok", v.AsInt64(), spanString(commit, "dagflow.node"), commit.Status(), nodeA)
		}
		if links := reserve.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != commit.SpanContext().SpanID() {
			t.Errorf("reserve attempt links %+v, want one, to its commit span %s", links, commit.SpanContext().SpanID())
		}

		pays := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range byName["dagflow.step traced/pay"] {
			childOfTrigger(s)
			pays[spanString(s, "dagflow.attempt")] = s
		}
		if len(pays) != 3 || len(byName["dagflow.step traced/pay"]) != 3 {
			t.Fatalf("pay attempts traced: %v, want 1, 2 and 3 once each", spanNames(byName["dagflow.step traced/pay"]))
		}
		for att, want := range map[string][2]string{"1": {nodeA, "lost"}, "2": {nodeB, "retrying"}, "3": {nodeB, "dead"}} {
			s := pays[att]
			if node, outcome := spanString(s, "dagflow.node"), spanString(s, "dagflow.outcome"); node != want[0] || outcome != want[1] {
				t.Errorf("pay attempt %s: node %q outcome %q, want %q %q", att, node, outcome, want[0], want[1])
			}
		}
		if got := spanString(pays["1"], "dagflow.recorded_by"); got != nodeB {
			t.Errorf("lost attempt recorded by %q, want the node that took it over, %q", got, nodeB)
		}
		for att, s := range pays {
			n := 0
			for _, kv := range s.Attributes() {
				if kv.Key == "dagflow.node" {
					n++
				}
			}
			if n != 1 || s.DroppedAttributes() != 0 {
				t.Errorf("pay attempt %s carries dagflow.node %d times (%d attributes dropped), want once", att, n, s.DroppedAttributes())
			}
		}
		for att, prev := range map[string]string{"2": "1", "3": "2"} {
			links := pays[att].Links()
			if len(links) != 1 || links[0].SpanContext.SpanID() != pays[prev].SpanContext().SpanID() {
				t.Errorf("pay attempt %s links %+v, want one link to attempt %s (%s)", att, links, prev, pays[prev].SpanContext().SpanID())
			}
			if got := spanString(pays[att], "dagflow.previous_attempt"); got != prev {
				t.Errorf("pay attempt %s: dagflow.previous_attempt %q, want %q", att, got, prev)
			}
		}
		comp := one("dagflow.compensate traced/reserve")
		childOfTrigger(comp)
		if node, outcome := spanString(comp, "dagflow.node"), spanString(comp, "dagflow.outcome"); node != nodeB || outcome != "compensated" {
			t.Errorf("compensation: node %q outcome %q, want %q compensated", node, outcome, nodeB)
		}

		mu.Lock()
		for _, e := range handlerErrs {
			t.Error(e)
		}
		mu.Unlock()
		// The handler's log line carries its attempt's ids, once.
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if !strings.Contains(line, "card declined") || strings.Contains(line, "failed") {
				continue
			}
			if strings.Count(line, `"trace_id"`) != 1 || !strings.Contains(line, traceID.String()) {
				t.Errorf("handler log line without its trace id (or with it twice): %s", line)
			}
		}
		if !strings.Contains(logs.String(), `"card declined"`) {
			t.Errorf("the handler's log lines are missing: %s", logs.String())
		}
	})
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, fmt.Sprintf("%s#%s(%s)", s.Name(), spanString(s, "dagflow.attempt"), spanString(s, "dagflow.outcome")))
	}
	return out
}

// syncBuffer is a log sink for concurrent writers.
type syncBuffer = testenv.SyncBuffer

// TestTracingTraceLogHandler: records logged with a span's context get
// its trace_id and span_id; records without one, and loggers that carry
// trace_id already, are left as they are.
func TestTracingTraceLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(engine.TraceLogHandler(slog.NewJSONHandler(&buf, nil)))
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	defer span.End()
	sc := span.SpanContext()

	log.InfoContext(ctx, "with span")
	log.InfoContext(context.Background(), "without span")
	log.With("trace_id", "given").InfoContext(ctx, "already has one")
	log.WithGroup("g").InfoContext(ctx, "in a group")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4: %s", len(lines), buf.String())
	}
	var recs []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		recs = append(recs, m)
	}
	if recs[0]["trace_id"] != sc.TraceID().String() || recs[0]["span_id"] != sc.SpanID().String() {
		t.Errorf("with span: %v, want trace_id %s span_id %s", recs[0], sc.TraceID(), sc.SpanID())
	}
	if _, ok := recs[1]["trace_id"]; ok {
		t.Errorf("without span: %v, want no trace_id", recs[1])
	}
	if recs[2]["trace_id"] != "given" || recs[2]["span_id"] != nil {
		t.Errorf("already has one: %v, want the logger's trace_id and nothing added", recs[2])
	}
	if g, _ := recs[3]["g"].(map[string]any); g["trace_id"] != sc.TraceID().String() {
		t.Errorf("in a group: %v, want trace_id %s", recs[3], sc.TraceID())
	}
}

// TestTracingTriggerTx: a run created by TriggerTx in the caller's
// transaction is traced like one from Trigger; a repeated idempotency key
// gives a trigger span that says it created nothing, and the run keeps
// the first trigger's trace; a refused Trigger's span says why; without
// a TracerProvider nothing is stored.
func TestTracingTriggerTx(t *testing.T) {
	st := sqliteStore(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	var seen sync.Map // step -> metadata seen by its handler
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		seen.Store(sc.Step, sc.Metadata)
		return nil, nil
	})
	wf, err := dag.New("tx").Step("a", h).Step("b", h, dag.After("a")).Build()
	if err != nil {
		t.Fatal(err)
	}
	env := enginetest.New(t, enginetest.Options{Store: st, Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf},
		Configure: func(c *engine.Config) { c.TracerProvider = tp }})
	ctx, caller := tp.Tracer("test").Start(context.Background(), "http request")
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := env.Engine.TriggerTx(ctx, tx, "tx", nil, engine.IdempotencyKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := env.Engine.Dispatch(ctx, id); err != nil {
		t.Fatal(err)
	}
	env.AssertRun(t, env.WaitTimeout(t, id, 20*time.Second), persistence.RunSucceeded)
	// The repeat, in another trace.
	ctx2, other := tp.Tracer("test").Start(context.Background(), "retried request")
	if again, err := env.Engine.Trigger(ctx2, "tx", nil, engine.IdempotencyKey("k")); err != nil || again != id {
		t.Fatalf("repeat: run %q, %v; want %q", again, err, id)
	}
	other.End()
	if _, err := env.Engine.Trigger(ctx, "nope", nil); err == nil {
		t.Fatal("Trigger of an unknown workflow succeeded")
	}
	caller.End()

	var trig []sdktrace.ReadOnlySpan
	stepSpans := map[string]sdktrace.ReadOnlySpan{}
	testenv.Eventually(t, 10*time.Second, func() bool {
		trig, stepSpans = nil, map[string]sdktrace.ReadOnlySpan{}
		for _, s := range exp.GetSpans().Snapshots() {
			switch {
			case strings.HasPrefix(s.Name(), "dagflow.trigger "):
				trig = append(trig, s)
			case strings.HasPrefix(s.Name(), "dagflow.step "):
				stepSpans[s.Name()] = s
			}
		}
		return len(trig) == 3 && len(stepSpans) == 2
	}, "want 3 trigger spans and 2 step spans")
	first, repeat, refused := trig[0], trig[1], trig[2]
	if first.Parent().SpanID() != caller.SpanContext().SpanID() || spanString(first, "dagflow.created") != "true" || spanString(first, "dagflow.run_id") != id {
		t.Errorf("TriggerTx span: parent %s created %s run %s; want child of %s, created, run %s",
			first.Parent().SpanID(), spanString(first, "dagflow.created"), spanString(first, "dagflow.run_id"), caller.SpanContext().SpanID(), id)
	}
	if repeat.Parent().SpanID() != other.SpanContext().SpanID() || spanString(repeat, "dagflow.created") != "false" || spanString(repeat, "dagflow.run_id") != id {
		t.Errorf("repeat span: parent %s created %s run %s; want child of %s, not created, run %s",
			repeat.Parent().SpanID(), spanString(repeat, "dagflow.created"), spanString(repeat, "dagflow.run_id"), other.SpanContext().SpanID(), id)
	}
	if refused.Name() != "dagflow.trigger nope" || refused.Status().Code != codes.Error || !strings.Contains(refused.Status().Description, "nope") {
		t.Errorf("refused trigger span: %q status %+v; want an error naming the workflow", refused.Name(), refused.Status())
	}
	for name, s := range stepSpans {
		if s.Parent().SpanID() != first.SpanContext().SpanID() || s.SpanContext().TraceID() != caller.SpanContext().TraceID() {
			t.Errorf("%s: parent %s trace %s; want the TriggerTx span %s in trace %s", name, s.Parent().SpanID(), s.SpanContext().TraceID(),
				first.SpanContext().SpanID(), caller.SpanContext().TraceID())
		}
	}
	for _, step := range []string{"a", "b"} {
		if md, _ := seen.Load(step); md.(map[string]string) != nil {
			t.Errorf("step %s saw metadata %v, want none (the trace keys are reserved)", step, md)
		}
	}
	run, err := st.RunGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(run.Metadata[engine.MetadataTraceparent], first.SpanContext().SpanID().String()) {
		t.Errorf("stored traceparent %q, want the TriggerTx span %s", run.Metadata[engine.MetadataTraceparent], first.SpanContext().SpanID())
	}

	// Without a provider, nothing is stored.
	plain := enginetest.New(t, enginetest.Options{Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf}})
	pid := plain.Trigger(t, "tx", nil)
	if r, err := plain.Store.RunGet(context.Background(), pid); err != nil || r.Metadata != nil {
		t.Errorf("untraced run's metadata %v (%v), want none", r.Metadata, err)
	}
}

// TestTracingSampledOut: a run whose trace the sampler drops (here its
// caller's span is not sampled, and the sampler is parent-based) records
// no span, while its handlers still see the trace's ids; a commit span
// links only to recorded attempts, and a sampled run beside it is traced
// in full, attributes and outcome included.
func TestTracingSampledOut(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	defer tp.Shutdown(context.Background())
	var seen sync.Map // run id + step -> the handler's span context
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		seen.Store(sc.RunID+"/"+sc.Step, trace.SpanContextFromContext(ctx))
		return nil, nil
	})
	wf, err := dag.New("sampled").Step("a", h).Step("b", h, dag.After("a")).Build()
	if err != nil {
		t.Fatal(err)
	}
	env := enginetest.New(t, enginetest.Options{Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf},
		Configure: func(c *engine.Config) { c.TracerProvider = tp }})
	dropped := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, Remote: true,
	})
	var unsampled, sampled []string
	for range 5 {
		id, err := env.Engine.Trigger(trace.ContextWithRemoteSpanContext(context.Background(), dropped), "sampled", nil)
		if err != nil {
			t.Fatal(err)
		}
		unsampled = append(unsampled, id)
		sampled = append(sampled, env.Trigger(t, "sampled", nil))
	}
	for _, id := range append(append([]string{}, unsampled...), sampled...) {
		env.AssertRun(t, env.WaitTimeout(t, id, 20*time.Second), persistence.RunSucceeded)
	}
	var spans []sdktrace.ReadOnlySpan
	testenv.Eventually(t, 10*time.Second, func() bool {
		spans = exp.GetSpans().Snapshots()
		n := 0
		for _, s := range spans {
			if strings.HasPrefix(s.Name(), "dagflow.step ") {
				n++
			}
		}
		return n == 2*len(sampled)
	}, "want the sampled runs' step spans")
	recorded := map[trace.SpanID]bool{}
	for _, s := range spans {
		recorded[s.SpanContext().SpanID()] = true
		if s.SpanContext().TraceID() == dropped.TraceID() {
			t.Errorf("span %s of the dropped trace was recorded", s.Name())
		}
	}
	commits := 0
	for _, s := range spans {
		switch {
		case s.Name() == "dagflow.commit":
			commits++
			for _, l := range s.Links() {
				if !recorded[l.SpanContext.SpanID()] {
					t.Errorf("commit span links to %s, which no recorded span is", l.SpanContext.SpanID())
				}
			}
		case strings.HasPrefix(s.Name(), "dagflow.step "):
			if got := spanString(s, "dagflow.outcome"); got != "succeeded" {
				t.Errorf("%s: outcome %q, want succeeded", s.Name(), got)
			}
			for _, k := range []string{"dagflow.run_id", "dagflow.step", "dagflow.attempt", "dagflow.queue", "dagflow.node",
				"messaging.system", "messaging.operation.type", "messaging.destination.name", "messaging.message.id"} {
				if _, ok := spanAttr(s, k); !ok {
					t.Errorf("%s: no %s attribute", s.Name(), k)
				}
			}
			if links := s.Links(); len(links) != 1 || !recorded[links[0].SpanContext.SpanID()] {
				t.Errorf("%s links %+v, want one, to its recorded commit span", s.Name(), links)
			}
		}
	}
	if commits == 0 {
		t.Error("no commit span recorded")
	}
	for _, id := range unsampled {
		for _, step := range []string{"a", "b"} {
			v, _ := seen.Load(id + "/" + step)
			if sc, _ := v.(trace.SpanContext); sc.TraceID() != dropped.TraceID() || sc.IsSampled() {
				t.Errorf("run %s step %s: handler's span context %v, want one of the dropped trace, not sampled", id, step, sc)
			}
		}
	}
}
