package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
)

func TestStepLimits(t *testing.T) {
	w, err := dag.New("bill").
		Step("charge", noop, dag.ConcurrencyKey("input.customer_id", 1),
			dag.RateLimit(100, time.Minute, dag.PerKey("input.customer.region"), dag.RateBurst(5))).
		Step("mail", noop, dag.RateLimit(20, time.Second)).
		Step("plain", noop).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	l := w.Step("charge").Limits
	if l == nil || l.Key != "input.customer_id" || l.Concurrency != 1 || l.Rate != 100 || l.Per != time.Minute ||
		l.Burst != 5 || l.RateKey != "input.customer.region" {
		t.Fatalf("charge's limits = %+v", l)
	}
	if w.Step("plain").Limits != nil {
		t.Errorf("a step without limit options has Limits %+v", w.Step("plain").Limits)
	}
	ctx := context.Background()
	for _, tc := range []struct{ input, key, rateKey string }{
		{`{"customer_id": "c-1", "customer": {"region": "eu"}}`, "c-1", "eu"},
		{`{"customer_id": 42}`, "42", ""},
		{`{}`, "", ""},
	} {
		key, rateKey, err := w.Step("charge").LimitKeys(ctx, json.RawMessage(tc.input))
		if err != nil || key != tc.key || rateKey != tc.rateKey {
			t.Errorf("LimitKeys(%s) = %q, %q, %v; want %q, %q", tc.input, key, rateKey, err, tc.key, tc.rateKey)
		}
	}
	if key, rateKey, err := w.Step("mail").LimitKeys(ctx, json.RawMessage(`{"x":1}`)); key != "" || rateKey != "" || err != nil {
		t.Errorf("mail's LimitKeys = %q, %q, %v; want no keys", key, rateKey, err)
	}

	// The stored definition keeps them, and a plan built from it too.
	d := w.Definition()
	if got := d.Steps[0].Limits; got == nil || got.Key != "input.customer_id" || got.Per != "1m0s" || got.RateKey != "input.customer.region" {
		t.Fatalf("stored limits = %+v", got)
	}
	if d.Steps[2].Limits != nil {
		t.Errorf("a step without limits stores %+v", d.Steps[2].Limits)
	}
	b, _ := json.Marshal(d)
	back, err := dag.ParseDefinition(b)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := dag.FromDefinition(back, w)
	if err != nil {
		t.Fatal(err)
	}
	if got := w2.Definition(); !reflect.DeepEqual(got, d) || got.Hash() != d.Hash() {
		t.Errorf("definition after a round trip = %+v, want %+v", got, d)
	}
}

func TestStepLimitsInvalid(t *testing.T) {
	for _, tc := range []struct {
		opt  dag.StepOption
		want string
	}{
		{dag.ConcurrencyKey("input.c", 0), "ConcurrencyKey needs both an expression and a limit above 0"},
		{dag.ConcurrencyKey("", 2), "ConcurrencyKey needs both"},
		{dag.ConcurrencyKey("steps.a.output", 1), "may read input only"},
		{dag.ConcurrencyKey("input.(", 1), "does not compile"},
		{dag.RateLimit(5, 0), "needs a period of at least 1ms"},
		{dag.RateLimit(-1, time.Second), "negative limit"},
	} {
		_, err := dag.New("w").Step("a", noop, tc.opt).Build()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build = %v, want an error saying %q", err, tc.want)
		}
		var de *dag.DefinitionError
		if !errors.As(err, &de) || de.Step != "a" {
			t.Errorf("Build error %v does not name step a", err)
		}
	}
}

func TestStepLimitsYAML(t *testing.T) {
	src := `
name: bill
steps:
  - name: charge
    handler: order.reserve
    concurrency: {key: input.customer_id, limit: 2}
    rate_limit: {rate: 100, per: 1m, burst: 5, per_key: input.region}
`
	w, err := dag.LoadYAML([]byte(src), "bill.yaml", registry(t))
	if err != nil {
		t.Fatal(err)
	}
	want := dag.Limits{Key: "input.customer_id", Concurrency: 2, Rate: 100, Per: time.Minute, Burst: 5, RateKey: "input.region"}
	if got := w.Step("charge").Limits; got == nil || got.Key != want.Key || got.Concurrency != want.Concurrency ||
		got.Rate != want.Rate || got.Per != want.Per || got.Burst != want.Burst || got.RateKey != want.RateKey {
		t.Fatalf("limits from YAML = %+v, want %+v", got, want)
	}
	_, err = dag.LoadYAML([]byte(strings.Replace(src, "limit: 2", "limt: 2", 1)), "bill.yaml", registry(t))
	if !errors.Is(err, dag.ErrUnknownField) {
		t.Errorf("a misspelt field = %v, want ErrUnknownField", err)
	}
}
