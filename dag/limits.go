package dag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Limits is a step's own flow control, held across every node by the
// queue (see docs/flow-control.md): at most Concurrency of its runs'
// steps with the same key value running at once, and at most Rate
// starts per Per (for each key value, with RateKey). A step over a limit
// waits queued: it does not fail and spends no attempt.
type Limits struct {
	// Key is the ConcurrencyKey expression, Concurrency its limit; both
	// empty or zero for none. Steps of one queue whose Key is the same
	// expression share its slots for each value.
	Key         string
	Concurrency int
	// Rate starts of the step per Per, 0 for none, from a token bucket
	// holding at most Burst (default 1).
	Rate  int
	Per   time.Duration
	Burst int
	// RateKey is the expression that splits the rate per value (the
	// bucket is then the step's and the value's), empty for one bucket
	// for the step.
	RateKey string

	key, rateKey *condition
}

// ConcurrencyKey lets at most n of the step run at once for each value
// of expr, on all nodes together. expr is an expression (the `when`
// language) over input, the run's input, evaluated when the step is
// queued: "input.customer_id" gives one slot group per customer. Its
// value is used as a string (a number as its JSON form); a missing value
// is the empty key, one group for all such steps. Steps of one queue that
// give the same expr share the slots of each value.
func ConcurrencyKey(expr string, n int) StepOption {
	return func(c *stepConfig) {
		c.limits().Key, c.limits().Concurrency = expr, n
	}
}

// RateOption refines [RateLimit].
type RateOption func(*Limits)

// PerKey gives each value of expr (as [ConcurrencyKey] reads it) its
// own token bucket.
func PerKey(expr string) RateOption { return func(l *Limits) { l.RateKey = expr } }

// RateBurst lets n starts happen at once after an idle while (default 1:
// starts are spaced per/n apart).
func RateBurst(n int) RateOption { return func(l *Limits) { l.Burst = n } }

// RateLimit lets at most n of the step start per per, on all nodes
// together (a token bucket in Redis); opts split it per key or set the
// burst. A step over its rate waits queued for its token.
func RateLimit(n int, per time.Duration, opts ...RateOption) StepOption {
	return func(c *stepConfig) {
		l := c.limits()
		l.Rate, l.Per = n, per
		for _, o := range opts {
			if o != nil {
				o(l)
			}
		}
	}
}

func (c *stepConfig) limits() *Limits {
	if c.lim == nil {
		c.lim = &Limits{}
	}
	return c.lim
}

// check validates and compiles l for step name.
func (l *Limits) check(v *validator, name string) {
	bad := func(format string, args ...any) {
		v.add(name, ErrInvalidOption, "step %q: "+format, append([]any{name}, args...)...)
	}
	switch {
	case l.Concurrency < 0 || l.Rate < 0 || l.Burst < 0:
		bad("negative limit (concurrency %d, rate %d, burst %d)", l.Concurrency, l.Rate, l.Burst)
	case (l.Key == "") != (l.Concurrency == 0):
		bad("ConcurrencyKey needs both an expression and a limit above 0, got %q and %d", l.Key, l.Concurrency)
	case l.Rate > 0 && l.Per < time.Millisecond:
		bad("RateLimit %d needs a period of at least 1ms, got %v", l.Rate, l.Per)
	case l.Rate == 0 && (l.Per != 0 || l.Burst != 0 || l.RateKey != ""):
		bad("a rate's period, burst or key needs a RateLimit above 0")
	}
	compile := func(what, src string) *condition {
		if src == "" {
			return nil
		}
		c, err := compileExpr(src, false)
		if err == nil && (len(c.refs) > 0 || c.dynamic) {
			err = errors.New("it may read input only (steps are not done when the step is queued)")
		}
		if err != nil {
			v.add(name, ErrBadCondition, "step %q: %s %q does not compile: %v", name, what, src, err)
			return nil
		}
		return c
	}
	l.key = compile("concurrency key", l.Key)
	l.rateKey = compile("rate key", l.RateKey)
}

// LimitKeys evaluates the step's limit keys on a run's input: the value
// of its ConcurrencyKey and of its rate's PerKey ("" for none). ctx
// bounds the evaluation as it bounds EvalWhen's.
func (s *Step) LimitKeys(ctx context.Context, input json.RawMessage) (key, rateKey string, err error) {
	if s.Limits == nil || (s.Limits.key == nil && s.Limits.rateKey == nil) {
		return "", "", nil
	}
	in, err := decodeJSON(input)
	if err != nil {
		return "", "", fmt.Errorf("dag: workflow %q: step %q: limit key: decode input: %w", s.workflow, s.Name, err)
	}
	eval := func(c *condition, src string) (string, error) {
		if c == nil {
			return "", nil
		}
		env := whenEnv{Input: in, Stop: new(atomic.Bool)}
		res, err := evaluate(ctx, c.prog, env, env.Stop)
		if err != nil {
			return "", fmt.Errorf("dag: workflow %q: step %q: limit key %q: %w", s.workflow, s.Name, src, err)
		}
		switch r := res.(type) {
		case nil:
			return "", nil
		case string:
			return r, nil
		}
		b, err := json.Marshal(res)
		if err != nil {
			return "", fmt.Errorf("dag: workflow %q: step %q: limit key %q: %w", s.workflow, s.Name, src, err)
		}
		return string(b), nil
	}
	if key, err = eval(s.Limits.key, s.Limits.Key); err != nil {
		return "", "", err
	}
	rateKey, err = eval(s.Limits.rateKey, s.Limits.RateKey)
	return key, rateKey, err
}

// LimitsDefinition is a step's [Limits] in a stored definition.
type LimitsDefinition struct {
	Key         string `json:"concurrency_key,omitempty"`
	Concurrency int    `json:"concurrency,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	// Per is the rate's period, as a Go duration.
	Per     string `json:"per,omitempty"`
	Burst   int    `json:"burst,omitempty"`
	RateKey string `json:"rate_key,omitempty"`
}

func (l *Limits) definition() *LimitsDefinition {
	if l == nil {
		return nil
	}
	d := &LimitsDefinition{Key: l.Key, Concurrency: l.Concurrency, Rate: l.Rate, Burst: l.Burst, RateKey: l.RateKey}
	if l.Per != 0 {
		d.Per = l.Per.String()
	}
	return d
}

// option is the step option that sets d.
func (d *LimitsDefinition) option() (StepOption, error) {
	var per time.Duration
	if d.Per != "" {
		var err error
		if per, err = time.ParseDuration(d.Per); err != nil {
			return nil, fmt.Errorf("limits: per: %w", err)
		}
	}
	return func(c *stepConfig) {
		*c.limits() = Limits{Key: d.Key, Concurrency: d.Concurrency, Rate: d.Rate, Per: per, Burst: d.Burst, RateKey: d.RateKey}
	}, nil
}
