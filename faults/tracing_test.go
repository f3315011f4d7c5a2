package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// TestTraceAcrossProcesses: one run whose steps ran on two worker
// processes, the first SIGKILLed mid-step, is one trace. The test
// process's span calls Trigger (the PRODUCER span, its child); every
// attempt in either process is a CONSUMER span, child of the trigger
// span: the killed attempt too, recorded as "lost" by the process that
// took the step over, and linked from the attempt that replaced it; a
// retry after a failure links to the attempt before; the compensations
// are there; each completion commit is a trace of its own, linked both
// ways with the attempts it recorded. The workers write their spans to
// files as they end (spanfile_test.go); the test reads them all.
func TestTraceAcrossProcesses(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	c := newCluster(t, clusterOptions{TracerProvider: tp})
	dir := t.TempDir()
	traced := func(cfg *childConfig) { cfg.TraceFile = filepath.Join(dir, cfg.Name+".spans") }

	// w1 runs a and holds b; then w2 starts and w1 is killed, so that
	// both processes ran steps of the run and every later attempt is w2's.
	w1 := c.start(1, traced)[0]
	ctx, caller := tp.Tracer("test").Start(context.Background(), "place order")
	id, err := c.eng.Trigger(ctx, wfChain, plan{N: 31, Hold: map[string][]int{"b": {1}}, Retry: map[string][]int{"c": {1}}, Fail: []string{"d"}})
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	c.waitEvent(30*time.Second, "hold", id, "b", "step", "1")
	w2 := c.start(1, traced)[0]
	w1.kill(t)
	runs := checkInvariants(t, c, []string{id}, 60*time.Second)
	if got := runs[id].Status; got != persistence.RunCompensated {
		t.Fatalf("run %s: %s, want compensated (%s)", id, got, runs[id].Error)
	}
	node1, node2 := nodeID(w1), nodeID(w2)

	// The last span, a's compensation, ends just after its outcome is
	// recorded.
	var spans []spanRecord
	testenv.Eventually(t, 10*time.Second, func() bool {
		spans, err = readSpanFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range spans {
			if s.Name == "dagflow.compensate chain/a" {
				return true
			}
		}
		return false
	}, "a's compensation span in the span files")

	var trigger sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "dagflow.trigger "+wfChain {
			trigger = s
		}
	}
	if trigger == nil {
		t.Fatalf("no trigger span in the test process")
	}
	traceID := caller.SpanContext().TraceID().String()
	trigID := trigger.SpanContext().SpanID().String()
	if trigger.SpanContext().TraceID().String() != traceID || trigger.Parent().SpanID() != caller.SpanContext().SpanID() || trigger.SpanKind() != trace.SpanKindProducer {
		t.Errorf("trigger span: trace %s parent %s kind %v; want the caller's trace %s, child of the caller, producer",
			trigger.SpanContext().TraceID(), trigger.Parent().SpanID(), trigger.SpanKind(), traceID)
	}

	// attempts["b#1"] is the span of attempt 1 of step b; compensations
	// are "~a#1".
	attempts := map[string]spanRecord{}
	commits := map[string]spanRecord{}
	pids := map[int]bool{}
	for _, s := range spans {
		pids[s.Process] = true
		if s.Name == "dagflow.commit" {
			if s.TraceID == traceID || s.Parent != "" {
				t.Errorf("commit span %s: trace %s parent %q; want a trace of its own", s.SpanID, s.TraceID, s.Parent)
			}
			commits[s.SpanID] = s
			continue
		}
		if s.TraceID != traceID {
			t.Errorf("span %q attempt %s (pid %d) in trace %s, want the run's %s", s.Name, s.Attrs["dagflow.attempt"], s.Process, s.TraceID, traceID)
		}
		if s.Parent != trigID || s.Kind != "consumer" {
			t.Errorf("span %q attempt %s: parent %s kind %s; want a consumer, child of the trigger span %s", s.Name, s.Attrs["dagflow.attempt"], s.Parent, s.Kind, trigID)
		}
		key := s.Attrs["dagflow.step"] + "#" + s.Attrs["dagflow.attempt"]
		if s.Attrs["dagflow.compensation"] == "true" {
			key = "~" + key
		}
		if _, dup := attempts[key]; dup {
			t.Errorf("two spans for %s", key)
		}
		attempts[key] = s
	}
	if !pids[w1.pid] || !pids[w2.pid] || len(pids) != 2 {
		t.Errorf("spans written by pids %v, want both workers' (%d, %d)", pids, w1.pid, w2.pid)
	}
	var got []string
	for k, s := range attempts {
		got = append(got, fmt.Sprintf("%s:%s@%s", k, s.Attrs["dagflow.outcome"], s.Attrs["dagflow.node"]))
	}
	t.Logf("%d spans in the run's trace (+ %d commit spans): %s", len(attempts)+1, len(commits), strings.Join(got, " "))

	want := map[string][2]string{ // outcome, node
		"a#1": {"succeeded", node1}, "b#1": {"lost", node1}, "b#2": {"succeeded", node2},
		"c#1": {"retrying", node2}, "c#2": {"succeeded", node2}, "d#1": {"dead", node2},
		"~c#1": {"compensated", node2}, "~b#1": {"compensated", node2}, "~a#1": {"compensated", node2},
	}
	if len(attempts) != len(want) {
		t.Errorf("%d attempt spans, want %d: %v", len(attempts), len(want), got)
	}
	for k, w := range want {
		s, ok := attempts[k]
		if !ok {
			t.Errorf("no span for %s", k)
			continue
		}
		if s.Attrs["dagflow.outcome"] != w[0] || s.Attrs["dagflow.node"] != w[1] || s.Attrs["dagflow.run_id"] != id {
			t.Errorf("%s: outcome %q node %q run %q; want %q %q %q", k, s.Attrs["dagflow.outcome"], s.Attrs["dagflow.node"], s.Attrs["dagflow.run_id"], w[0], w[1], id)
		}
	}
	// The lost attempt is recorded by the process that took it over.
	if lost := attempts["b#1"]; lost.Process != w2.pid || lost.Attrs["dagflow.recorded_by"] != node2 || lost.Status != "Error" {
		t.Errorf("lost attempt b#1: written by pid %d, recorded_by %q, status %s; want pid %d, %q, Error", lost.Process, lost.Attrs["dagflow.recorded_by"], lost.Status, w2.pid, node2)
	}
	// Each retry links to the attempt before it.
	linksTo := func(s spanRecord, id string) bool {
		for _, l := range s.Links {
			if l.SpanID == id {
				return true
			}
		}
		return false
	}
	for next, prev := range map[string]string{"b#2": "b#1", "c#2": "c#1"} {
		if s := attempts[next]; !linksTo(s, attempts[prev].SpanID) || s.Attrs["dagflow.previous_attempt"] != "1" {
			t.Errorf("%s: links %+v, previous_attempt %q; want a link to %s (%s)", next, s.Links, s.Attrs["dagflow.previous_attempt"], prev, attempts[prev].SpanID)
		}
	}
	// Each success links to the commit that recorded it, in its own
	// process, and the commit back to it.
	for _, k := range []string{"a#1", "b#2", "c#2"} {
		s := attempts[k]
		found := false
		for _, l := range s.Links {
			if cm, ok := commits[l.SpanID]; ok {
				found = true
				if !linksTo(cm, s.SpanID) || cm.Process != s.Process {
					t.Errorf("%s's commit span %s (pid %d) does not link back to it or is another process's", k, cm.SpanID, cm.Process)
				}
			}
		}
		if !found {
			t.Errorf("%s links to no commit span: %+v", k, s.Links)
		}
	}
}
