package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
)

func TestEvalWhen(t *testing.T) {
	reserveEU := map[string]json.RawMessage{"reserve": json.RawMessage(`{"warehouse":"EU","items":[1,2]}`)}
	tests := []struct {
		name    string
		when    string
		input   string
		outputs map[string]json.RawMessage
		want    bool
		wantErr string // empty: no error
	}{
		{name: "no condition", when: "", input: `{}`, want: true},
		{name: "true", when: "input.total >= 100", input: `{"total":120}`, want: true},
		{name: "false", when: "input.total >= 100", input: `{"total":99.5}`, want: false},
		{name: "integer literal against float", when: "input.total == 100", input: `{"total":100}`, want: true},
		{
			name: "input and upstream output", when: `input.total >= 100 && steps.reserve.output.warehouse == "EU"`,
			input: `{"total":150}`, outputs: reserveEU, want: true,
		},
		{name: "functions on outputs", when: `len(steps.reserve.output.items) == 2`, outputs: reserveEU, want: true},
		{name: "missing field compared for equality is false", when: `input.country == "FR"`, input: `{}`, want: false},
		{name: "missing field equals nil", when: `input.total == nil`, input: `{}`, want: true},
		{name: "missing nested field is nil, not an error", when: `input.customer.address.country == "FR"`, input: `{}`, want: false},
		{name: "missing upstream output is nil", when: `steps.reserve.output.warehouse == "EU"`, outputs: nil, want: false},
		{name: "null upstream output is nil", when: `steps.reserve.output.warehouse != "EU"`, outputs: map[string]json.RawMessage{"reserve": nil}, want: true},
		{name: "empty input", when: `input == nil`, input: ``, want: true},
		{name: "missing field with a default", when: `(input.total ?? 0) >= 100`, input: `{}`, want: false},
		{name: "nil result is false", when: `input.flag`, input: `{}`, want: false},
		{name: "bool field", when: `input.flag`, input: `{"flag":true}`, want: true},
		{
			name: "missing field in an ordering is an error", when: "input.total >= 100", input: `{}`,
			wantErr: `dag: workflow "w": step "s": when "input.total >= 100": when condition failed: invalid operation: <nil> >= int (1:13)`,
		},
		{
			name: "wrong type is an error", when: "input.total >= 100", input: `{"total":"lots"}`,
			wantErr: `dag: workflow "w": step "s": when "input.total >= 100": when condition failed: invalid operation: string >= int (1:13)`,
		},
		{
			name: "non boolean result is an error", when: "input.total", input: `{"total":3}`,
			wantErr: `dag: workflow "w": step "s": when "input.total": when condition failed: invalid operation: bool(float64) (1:1)`,
		},
		{
			name: "input that is not JSON", when: "input.total > 1", input: `{`,
			wantErr: `dag: workflow "w": step "s": when "input.total > 1": when condition failed: decode input: unexpected end of JSON input`,
		},
		{
			name: "upstream output that is not JSON", when: "steps.reserve.output != nil", outputs: map[string]json.RawMessage{"reserve": json.RawMessage(`nope`)},
			wantErr: `dag: workflow "w": step "s": when "steps.reserve.output != nil": when condition failed: decode output of step "reserve": invalid character 'o' in literal null (expecting 'u')`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := dag.New("w").Step("reserve", noop).Step("s", noop, dag.After("reserve"), dag.When(tt.when)).Build()
			if err != nil {
				t.Fatal(err)
			}
			got, err := w.Step("s").EvalWhen(context.Background(), json.RawMessage(tt.input), tt.outputs)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("EvalWhen() = %v, %v\nwant error: %s", got, err, tt.wantErr)
				}
				if !errors.Is(err, dag.ErrEvalCondition) {
					t.Errorf("errors.Is(err, ErrEvalCondition) = false")
				}
				return
			}
			if err != nil {
				t.Fatalf("EvalWhen(): %v", err)
			}
			if got != tt.want {
				t.Errorf("EvalWhen() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEvalWhenConcurrent(t *testing.T) {
	w, err := dag.New("w").Step("s", noop, dag.When("input.n > 3")).Build()
	if err != nil {
		t.Fatal(err)
	}
	s := w.Step("s")
	errs := make(chan error)
	for i := range 8 {
		go func() {
			got, err := s.EvalWhen(context.Background(), json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), nil)
			if err == nil && got != (i > 3) {
				err = fmt.Errorf("n=%d: EvalWhen = %v, want %v", i, got, i > 3)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestBackoff(t *testing.T) {
	p := dag.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2}
	full := p
	full.Jitter = 1
	half := p
	half.Jitter = 0.5
	tests := []struct {
		name     string
		p        dag.RetryPolicy
		failures int
		rnd      float64
		want     time.Duration
	}{
		{name: "first retry", p: p, failures: 1, want: time.Second},
		{name: "second retry doubles", p: p, failures: 2, want: 2 * time.Second},
		{name: "sixth retry", p: p, failures: 6, want: 32 * time.Second},
		{name: "capped", p: p, failures: 7, want: time.Minute},
		{name: "huge failure count stays capped", p: p, failures: 10000, want: time.Minute},
		{name: "zero failures counts as one", p: p, failures: 0, want: time.Second},
		{name: "full jitter, rnd 0 is the top", p: full, failures: 3, rnd: 0, want: 4 * time.Second},
		{name: "full jitter, rnd .75", p: full, failures: 3, rnd: 0.75, want: time.Second},
		{name: "half jitter, rnd .5", p: half, failures: 3, rnd: 0.5, want: 3 * time.Second},
		{name: "rnd out of range is clamped", p: half, failures: 1, rnd: -3, want: time.Second},
		{name: "no cap", p: dag.RetryPolicy{InitialBackoff: time.Hour, Multiplier: 10}, failures: 100, want: time.Duration(math.MaxInt64)},
		{name: "zero policy", p: dag.RetryPolicy{}, failures: 3, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Backoff(tt.failures, tt.rnd); got != tt.want {
				t.Errorf("Backoff(%d, %v) = %v, want %v", tt.failures, tt.rnd, got, tt.want)
			}
		})
	}
}

func TestBackoffBounds(t *testing.T) {
	for _, j := range []float64{0, 0.1, 0.5, 1} {
		p := dag.DefaultRetryPolicy()
		p.Jitter = j
		for failures := 1; failures <= 12; failures++ {
			d := float64(p.Backoff(failures, 0))
			lo := time.Duration(d * (1 - j))
			for _, rnd := range []float64{0, 0.001, 0.25, 0.5, 0.999, 0.999999999} {
				got := p.Backoff(failures, rnd)
				if got < lo || got > time.Duration(d) || got > p.MaxBackoff {
					t.Errorf("jitter %v failures %d rnd %v: Backoff = %v, want in [%v, %v]", j, failures, rnd, got, lo, time.Duration(d))
				}
			}
		}
	}
}
