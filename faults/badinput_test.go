package faults

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// Scenario 11: bad input gets a clear typed error before anything is
// stored, and nothing already stored changes. An output too large to store
// and an input that does not fit a typed step are dead-lettered at once
// with an error that says so, rather than retried.
func TestBadInput(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	c.start(1, nil)
	ctx := context.Background()
	good := c.trigger(wfChain, plan{N: 11})
	c.waitRuns([]string{good}, 30*time.Second)
	before := c.snapshot()

	huge := map[string]string{"pad": strings.Repeat("x", 2<<20)}
	cases := []struct {
		name string
		err  func() error
		want error
	}{
		{"oversized input", func() error { _, err := c.eng.Trigger(ctx, wfChain, huge); return err }, persistence.ErrTooLarge},
		{"invalid JSON", func() error { _, err := c.eng.Trigger(ctx, wfTyped, []byte(`{"qty": 1`)); return err }, engine.ErrInvalidInput},
		{"unknown workflow", func() error { _, err := c.eng.Trigger(ctx, "nope", nil); return err }, engine.ErrUnknownWorkflow},
		{"invalid idempotency key", func() error {
			_, err := c.eng.Trigger(ctx, wfChain, nil, engine.IdempotencyKey("\xff\xfe"))
			return err
		}, persistence.ErrInvalid},
		{"oversized metadata", func() error {
			_, err := c.eng.Trigger(ctx, wfChain, nil, engine.Metadata(huge))
			return err
		}, persistence.ErrTooLarge},
		{"invalid workflow name", func() error {
			_, err := dag.New("bad name!").Step("a", steps.HandlerFunc(nil)).Build()
			return err
		}, dag.ErrInvalidName},
		{"invalid step name", func() error {
			_, err := dag.New("ok").Step("no/slash", (&handlers{}).handler()).Build()
			return err
		}, dag.ErrInvalidName},
		{"cycle in YAML", func() error {
			reg := steps.NewRegistry()
			reg.MustRegister("work", (&handlers{}).handler())
			_, err := dag.LoadYAML([]byte(cycleYAML), "cycle.yaml", reg)
			var ye *dag.YAMLError
			if err != nil && !errors.As(err, &ye) {
				t.Errorf("cycle: %T is not a *dag.YAMLError", err)
			}
			return err
		}, dag.ErrCycle},
	}
	for _, tc := range cases {
		err := tc.err()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want one wrapping %v", tc.name, err, tc.want)
			continue
		}
		t.Logf("%s: %v", tc.name, firstLine(err.Error()))
	}
	if after := c.snapshot(); after != before {
		t.Errorf("the store changed after refused inputs:\nbefore %s\nafter  %s", before, after)
	}

	// Inputs that only the handler can judge, and an output the store
	// refuses: dead at the first attempt, with the reason.
	typed := c.trigger(wfTyped, map[string]string{"qty": "many"})
	big := c.trigger(wfChain, plan{N: 12, BigOutput: map[string]int{"a": 2 << 20}})
	runs := checkInvariants(t, c, []string{good, typed, big}, 30*time.Second)
	for id, want := range map[string][]string{typed: {`"t"`, "faults.order"}, big: {"output", "over the limit"}} {
		if runs[id].Status != persistence.RunFailed {
			t.Errorf("run %s: %s, want failed", id, runs[id].Status)
		}
		for _, w := range want {
			if !strings.Contains(runs[id].Error, w) {
				t.Errorf("run %s error %q does not say %q", id, runs[id].Error, w)
			}
		}
		if !strings.Contains(runs[id].Error, "after 1 attempt") {
			t.Errorf("run %s error %q: want dead after 1 attempt (a permanent error)", id, runs[id].Error)
		}
	}
}

const cycleYAML = `
name: loop
steps:
  - name: a
    handler: work
    after: [c]
  - name: b
    handler: work
    after: [a]
  - name: c
    handler: work
    after: [b]
`

// handler is a do-nothing handler for builder tests.
func (h *handlers) handler() steps.Handler {
	return steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) { return nil, nil })
}

// snapshot summarises every row of dagflow's tables.
func (c *cluster) snapshot() string {
	c.t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', id, status, COALESCE(error, ''), updated_at))), 0) FROM workflow_runs`,
		`SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', run_id, step, status, attempt, updated_at))), 0) FROM step_runs`,
		`SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', id, outcome, COALESCE(finished_at, '')))), 0) FROM step_attempts`,
	} {
		var n, sum int64
		if err := c.db.QueryRow(q).Scan(&n, &sum); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, strings.Join([]string{itoa(n), itoa(sum)}, ":"))
	}
	return strings.Join(out, " ")
}
