package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/codec/aesgcm"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// With the codec on, a schedule's input is stored encrypted, and the
// engine gives it back decoded (GetSchedule, the runs it starts).
func TestCodecSealsScheduleInput(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var got sync.Map
		echo := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			got.Store(sc.RunID, string(sc.Input))
			return nil, nil
		})
		wf, err := dag.New("report").Step("send", echo).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		o.Configure = func(c *engine.Config) { c.Codec = testCodec(t) }
		env := enginetest.New(t, o)
		ctx := context.Background()

		in := json.RawMessage(`{"customer":"MRKSCHED-1"}`)
		if _, err := env.Engine.CreateSchedule(ctx, engine.ScheduleDefinition{Name: "nightly", Spec: "0 2 * * *",
			Workflow: "report", Input: in}); err != nil {
			t.Fatal(err)
		}
		edited := json.RawMessage(`{"customer":"MRKSCHED-2"}`)
		if _, err := env.Engine.EditSchedule(ctx, "nightly", engine.ScheduleChange{Input: &edited}); err != nil {
			t.Fatal(err)
		}
		si, err := env.Engine.GetSchedule(ctx, "nightly")
		if err != nil || string(si.Input) != string(edited) {
			t.Errorf("GetSchedule: input %s (%v), want %s decoded", si.Input, err, edited)
		}
		list, err := env.Engine.Schedules(ctx)
		if err != nil || len(list) != 1 || string(list[0].Input) != string(edited) {
			t.Errorf("Schedules: %+v (%v), want nightly with its input decoded", list, err)
		}
		id, err := env.Engine.TriggerSchedule(ctx, "nightly")
		if err != nil {
			t.Fatal(err)
		}
		env.AssertRun(t, env.Wait(t, id), persistence.RunSucceeded)
		if v, _ := got.Load(id); v != string(edited) {
			t.Errorf("the schedule's run saw input %v, want %s", v, edited)
		}
		found := scanStore(t, env.Store, []string{"MRKSCHED", "nightly"})
		if len(found["nightly"]) == 0 {
			t.Fatal("the scan did not find the schedule's name, which is stored in clear: it reads nothing")
		}
		if len(found["MRKSCHED"]) > 0 {
			t.Errorf("a schedule's input found in clear in the store at %s", strings.Join(found["MRKSCHED"], ", "))
		}
	})
}

// With the codec on, the correlation values of events, waits and their
// locks are stored as keyed hashes; a wait still matches its exact value
// (event first or wait first) and no near miss.
func TestCodecHashesCorrelations(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var shipped, released sync.Map
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{paymentWorkflow(t, &shipped, &released)}
		o.Configure = func(c *engine.Config) { c.Codec = testCodec(t) }
		env := enginetest.New(t, o)
		ctx := context.Background()

		runA := env.Trigger(t, "payment", map[string]any{"order_id": "MRKCORR-A"})
		waitParked(t, env.Engine, runA, "paid")
		for _, miss := range []string{"MRKCORR-A ", "mrkcorr-a", "MRKCORR-", "MRKCORR-AA"} {
			if _, err := env.Engine.Publish(ctx, "payment.captured", map[string]any{"miss": miss}, engine.Correlation(miss)); err != nil {
				t.Fatal(err)
			}
		}
		if info := mustGet(t, env.Engine, runA); stepOf(t, info, "paid").Status != persistence.StepParked {
			t.Fatalf("after near misses, paid is %s, want parked", stepOf(t, info, "paid").Status)
		}
		w, err := env.Engine.WhyWaiting(ctx, runA, "paid")
		if err != nil || strings.Contains(w.Detail, "MRKCORR") {
			t.Errorf("WhyWaiting: %q (%v); want the correlation not shown in clear", w.Detail, err)
		}
		found := scanStore(t, env.Store, []string{"MRKCORR"})
		if len(found["MRKCORR"]) > 0 {
			t.Errorf("a correlation value found in clear in the store at %s", strings.Join(found["MRKCORR"], ", "))
		}
		if _, err := env.Engine.Publish(ctx, "payment.captured", map[string]any{"amount": 1}, engine.Correlation("MRKCORR-A")); err != nil {
			t.Fatal(err)
		}
		info := env.Wait(t, runA)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if got := string(stepOf(t, info, "paid").Output); got != `{"amount":1}` {
			t.Errorf("paid's output = %s, want the exact match's payload", got)
		}

		// The event first, then the run.
		if _, err := env.Engine.Publish(ctx, "payment.captured", map[string]any{"amount": 3}, engine.Correlation("MRKCORR-C")); err != nil {
			t.Fatal(err)
		}
		runC := env.Trigger(t, "payment", map[string]any{"order_id": "MRKCORR-C"})
		info = env.Wait(t, runC)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if got := string(stepOf(t, info, "paid").Output); got != `{"amount":3}` {
			t.Errorf("early event: paid's output = %s, want C's payload", got)
		}
		found = scanStore(t, env.Store, []string{"MRKCORR"})
		if len(found["MRKCORR"]) > 0 {
			t.Errorf("a correlation value found in clear in the store at %s", strings.Join(found["MRKCORR"], ", "))
		}
	})
}

// With the codec on, a step's concurrency key is read from the decoded
// input: one customer's steps run one at a time, two customers' at once.
func TestCodecConcurrencyKeyPerCustomer(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const took = 300 * time.Millisecond
		wf, err := dag.New("billing").
			Step("charge", sleepStep(took), dag.Queue("bill"), dag.ConcurrencyKey("input.customer", 1)).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Clock, o.Workflows = engine.SystemClock, []*dag.Workflow{wf}
		o.Configure = func(c *engine.Config) { c.Codec = testCodec(t); c.Concurrency = 4 }
		env := enginetest.New(t, o)
		byCustomer := map[string][]string{}
		for _, cust := range []string{"a", "b", "a", "b"} {
			byCustomer[cust] = append(byCustomer[cust], env.Trigger(t, "billing", map[string]any{"customer": cust}))
		}
		a := forwardAttempts(t, env, byCustomer["a"])
		bb := forwardAttempts(t, env, byCustomer["b"])
		if got := maxOverlap(a); got > 1 {
			t.Errorf("%d steps of customer a ran at once; the key's limit is 1", got)
		}
		if got := maxOverlap(bb); got > 1 {
			t.Errorf("%d steps of customer b ran at once; the key's limit is 1", got)
		}
		if got := maxOverlap(append(a, bb...)); got < 2 {
			t.Errorf("at most %d step ran at once: customers a and b did not run in parallel (one key for all)", got)
		}
	})
}

// A key rotation strands no wait: a node whose current key is newer
// matches a wait parked, and an event published, under the older key.
func TestCodecCorrelationAcrossKeyRotation(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		k1, k2 := bytes.Repeat([]byte{7}, aesgcm.KeySize), bytes.Repeat([]byte{8}, aesgcm.KeySize)
		before, err := aesgcm.New("k1", map[string][]byte{"k1": k1})
		if err != nil {
			t.Fatal(err)
		}
		after, err := aesgcm.New("k2", map[string][]byte{"k1": k1, "k2": k2})
		if err != nil {
			t.Fatal(err)
		}
		var shipped, released sync.Map
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{paymentWorkflow(t, &shipped, &released)}
		o.Configure = func(c *engine.Config) { c.Codec = before }
		old := enginetest.New(t, o)
		ctx := context.Background()
		runA := old.Trigger(t, "payment", map[string]any{"order_id": "MRKROT-A"})
		waitParked(t, old.Engine, runA, "paid")
		if _, err := old.Engine.Publish(ctx, "payment.captured", map[string]any{"amount": 2}, engine.Correlation("MRKROT-B")); err != nil {
			t.Fatal(err)
		}
		if err := old.Engine.Stop(ctx); err != nil {
			t.Fatal(err)
		}

		o.Store, o.Redis, o.Prefix, o.Clock = old.Store, old.Redis, old.Prefix, old.Clock
		o.Configure = func(c *engine.Config) { c.Codec = after }
		rotated := enginetest.New(t, o)
		if _, err := rotated.Engine.Publish(ctx, "payment.captured", map[string]any{"amount": 1}, engine.Correlation("MRKROT-A")); err != nil {
			t.Fatal(err)
		}
		info := rotated.Wait(t, runA)
		rotated.AssertRun(t, info, persistence.RunSucceeded)
		if paid := stepOf(t, info, "paid"); string(paid.Output) != `{"amount":1}` || paid.Attempt != 1 {
			t.Errorf("a wait parked under k1: paid = attempt %d, output %s; want the event's payload on the first attempt (no timeout)", paid.Attempt, paid.Output)
		}
		runB := rotated.Trigger(t, "payment", map[string]any{"order_id": "MRKROT-B"})
		info = rotated.Wait(t, runB)
		rotated.AssertRun(t, info, persistence.RunSucceeded)
		if paid := stepOf(t, info, "paid"); string(paid.Output) != `{"amount":2}` || paid.Attempt != 1 {
			t.Errorf("an event published under k1: paid = attempt %d, output %s; want its payload on the first attempt", paid.Attempt, paid.Output)
		}
	})
}
