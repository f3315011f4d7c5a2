package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// nested returns depth JSON arrays, one inside the other.
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// nestedValue returns the Go value of nested(depth).
func nestedValue(depth int) any {
	var v any = []any{}
	for range depth - 1 {
		v = []any{v}
	}
	return v
}

// A payload nested past the JSON decoder's limit is refused as too deeply
// nested, naming the limit, not as "not valid JSON": whether it comes as
// raw JSON (the engine checks it) or as a Go value (the store does).
func TestNestedPayloadErrorNamesTheLimit(t *testing.T) {
	r := &recorder{}
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}})
	ctx := context.Background()
	const want = "too deeply nested (limit 10000)"

	_, err := env.Engine.Trigger(ctx, "order", json.RawMessage(nested(10001)))
	if !errors.Is(err, engine.ErrInvalidInput) || err.Error() != `engine: workflow "order": invalid input: `+want {
		t.Errorf("raw input nested 10001 deep: err = %v, want %q", err, want)
	}
	_, err = env.Engine.Trigger(ctx, "order", nestedValue(10001))
	if !errors.Is(err, persistence.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("Go input nested 10001 deep: err = %v, want ErrInvalid saying %q", err, want)
	}
	if _, err := env.Engine.Trigger(ctx, "order", json.RawMessage(nested(10000))); err != nil {
		t.Errorf("input nested 10000 deep (the limit): %v", err)
	}
	_, err = env.Engine.Trigger(ctx, "order", json.RawMessage(`{"a":`+nested(20000)))
	if !strings.Contains(err.Error(), want) {
		t.Errorf("truncated input nested 20000 deep: err = %v, want %q", err, want)
	}
	_, err = env.Engine.Trigger(ctx, "order", json.RawMessage(`{"a":"`+strings.Repeat("[", 20000)+`"`))
	if err == nil || !strings.HasSuffix(err.Error(), "not valid JSON") {
		t.Errorf("brackets inside an unterminated string: err = %v, want not valid JSON", err)
	}
}

// A step whose output nests past the limit is dead, and its error says so.
func TestNestedOutputErrorNamesTheLimit(t *testing.T) {
	deep := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		return json.RawMessage(nested(10001)), nil
	})
	wf, err := dag.New("deep").Step("a", deep).Build()
	if err != nil {
		t.Fatal(err)
	}
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{wf}})
	id, err := env.Engine.Trigger(context.Background(), "deep", nil)
	if err != nil {
		t.Fatal(err)
	}
	env.Wait(t, id)
	s, ok := mustGet(t, env.Engine, id).Step("a")
	if !ok || s.Status != persistence.StepDead || !strings.Contains(s.Error, "output is too deeply nested (limit 10000)") {
		t.Errorf("step a: %s %q, want dead with output is too deeply nested (limit 10000)", s.Status, s.Error)
	}
}
