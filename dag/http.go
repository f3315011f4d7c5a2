package dag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"go.yaml.in/yaml/v3"

	"github.com/dagflow/dagflow/internal/yamlwalk"
	"github.com/dagflow/dagflow/steps"
)

// Errors of `kind: http` steps in YAML, found in a *[YAMLError]'s Err.
var (
	// ErrInvalidHTTPStep reports a kind: http step whose settings are
	// wrong: url, method, headers, body template...
	ErrInvalidHTTPStep = errors.New("dag: invalid http step")
	// ErrUnknownKind reports a step kind other than http.
	ErrUnknownKind = errors.New("dag: unknown step kind")
)

// KindHTTP is the kind of a step whose handler is a *[steps.HTTP]: a
// `kind: http` step of a YAML workflow, or a Go step given one.
const KindHTTP = "http"

// HTTPDefinition is what a stored definition says of an HTTP step: where
// it goes, never with what secrets. Headers lists the names of the
// headers it sets, without their values.
type HTTPDefinition struct {
	URL     string   `json:"url"`
	Method  string   `json:"method"`
	Headers []string `json:"headers,omitempty"`
}

// httpDefinition describes h for a stored definition.
func httpDefinition(h *steps.HTTP) *HTTPDefinition {
	return &HTTPDefinition{URL: h.URL, Method: h.EffectiveMethod(), Headers: h.HeaderNames()}
}

// httpFields are the step fields of kind: http, in YAML.
var httpFields = []string{"url", "method", "headers", "headers_from_env", "body", "max_response_bytes", "max_retry_after"}

// bodyTemplate is a compiled `body`: an expr expression over input and
// steps.<name>.output, as a `when` condition sees them, whose value is
// the request body as JSON.
type bodyTemplate struct {
	src  string
	cond *condition
}

// compileBody compiles a body template (see [Step.EvalWhen] for the
// environment; the result may be any JSON value).
func compileBody(src string) (*bodyTemplate, error) {
	c, err := compileExpr(src, false)
	if err != nil {
		return nil, err
	}
	return &bodyTemplate{src: src, cond: c}, nil
}

// render evaluates the template for an attempt. Data the template does
// not fit is a permanent failure (the next attempt has the same data),
// and so is an evaluation that runs over its budget (WithExprBudget); an
// evaluation its context stopped (the step's timeout) is not.
func (b *bodyTemplate) render(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
	fail := func(format string, args ...any) error {
		return steps.Permanent(fmt.Errorf("dag: step %q: body %q: %s", sc.Step, b.src, fmt.Sprintf(format, args...)))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dag: step %q: body: %w", sc.Step, context.Cause(ctx))
	}
	in, err := decodeJSON(sc.Input)
	if err != nil {
		return nil, fail("decode input: %v", err)
	}
	stepEnv := make(map[string]any)
	for name, raw := range sc.Outputs {
		if !b.cond.dynamic && !slices.Contains(b.cond.refs, name) {
			continue
		}
		out, err := decodeJSON(raw)
		if err != nil {
			return nil, fail("decode output of step %q: %v", name, err)
		}
		stepEnv[name] = map[string]any{"output": out}
	}
	env := whenEnv{Input: in, Steps: stepEnv, Stop: new(atomic.Bool)}
	res, err := evaluate(ctx, b.cond.prog, env, env.Stop)
	var se *stopError
	switch {
	case errors.As(err, &se) && overBudget(se):
		return nil, steps.Permanent(fmt.Errorf("dag: step %q: body %q: %w", sc.Step, b.src, se))
	case se != nil:
		return nil, fmt.Errorf("dag: step %q: body: %w", sc.Step, se.cause)
	case err != nil:
		return nil, fail("%v", err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, fail("the value is not JSON: %v", err)
	}
	return out, nil
}

// httpStep gathers a YAML step's kind: http fields while the step is
// read, and builds the handler once every field is known.
type httpStep struct {
	kind     string
	kindNode *yaml.Node
	h        steps.HTTP
	body     string
	bodySet  bool
	fields   map[string]*yaml.Node // http field -> value node
}

// field reads one of the http fields of a step.
func (l *loader) httpField(hs *httpStep, key, f string, v *yaml.Node) {
	if hs.fields == nil {
		hs.fields = make(map[string]*yaml.Node)
	}
	hs.fields[key] = v
	switch key {
	case "url":
		hs.h.URL, _ = l.Str(v, f)
	case "method":
		hs.h.Method, _ = l.Str(v, f)
	case "headers":
		hs.h.Headers = l.stringMap(v, f)
	case "headers_from_env":
		hs.h.HeadersFromEnv = l.stringMap(v, f)
	case "body":
		hs.body, hs.bodySet = l.Str(v, f)
	case "max_response_bytes":
		if n, ok := l.Int(v, f); ok {
			hs.h.MaxResponseBytes = int64(n)
		}
	case "max_retry_after":
		hs.h.MaxRetryAfter, _ = l.Duration(v, f)
	}
}

// stringMap decodes a mapping of strings to strings.
func (l *loader) stringMap(n *yaml.Node, field string) map[string]string {
	if !l.Mapping(n, field, "a mapping of names to strings") {
		return nil
	}
	m := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlwalk.Resolve(n.Content[i]), yamlwalk.Resolve(n.Content[i+1])
		name, ok := l.Str(k, field)
		if !ok {
			continue
		}
		if _, dup := m[name]; dup {
			l.Failf(k, yamlwalk.Join(field, name), "repeated field")
			continue
		}
		if s, ok := l.Str(v, yamlwalk.Join(field, name)); ok {
			m[name] = s
		}
	}
	return m
}

// httpHandler checks a step's kind and http fields and returns its
// handler: the *steps.HTTP of a kind: http step, or nil (with no problem)
// for a step without kind. deps are the step's after and needs; handler
// is its handler field, if any.
func (l *loader) httpHandler(hs *httpStep, d stepNode, deps []string, handler *yaml.Node) (steps.Handler, bool) {
	invalid := func(n *yaml.Node, key, format string, args ...any) {
		l.Fail(n, d.path+"."+key, &sentinelError{sentinel: ErrInvalidHTTPStep,
			msg: fmt.Sprintf("step %q: %s: %s", d.name, unprefixed(ErrInvalidHTTPStep), fmt.Sprintf(format, args...))})
	}
	if hs.kindNode == nil {
		for _, key := range httpFields {
			if v := hs.fields[key]; v != nil {
				invalid(v, key, "%s is a field of kind: http steps", key)
				return nil, false
			}
		}
		return nil, true
	}
	if hs.kind != KindHTTP {
		l.Fail(hs.kindNode, d.path+".kind", &sentinelError{sentinel: ErrUnknownKind,
			msg: fmt.Sprintf("step %q: unknown kind %q (want http, or a handler without kind)", d.name, hs.kind)})
		return nil, false
	}
	ok := true
	if handler != nil {
		invalid(handler, "handler", "a kind: http step has no handler")
		ok = false
	}
	if hs.fields["url"] == nil {
		l.Fail(d.node, d.path+".url", &sentinelError{sentinel: ErrMissingField,
			msg: fmt.Sprintf("step %q: %s: an http step needs a url", d.name, unprefixed(ErrMissingField))})
		return nil, false
	}
	if err := hs.h.Check(); err != nil {
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var ce *steps.HTTPConfigError
			if errors.As(e, &ce) {
				n := hs.fields[ce.Field]
				if n == nil {
					n = d.node
				}
				invalid(n, ce.Field, "%s %s", ce.Field, ce.Reason)
			}
		}
		ok = false
	}
	if hs.bodySet {
		bt, err := compileBody(hs.body)
		switch {
		case err != nil:
			invalid(hs.fields["body"], "body", "body does not compile: %v", err)
			ok = false
		case bt.cond.dynamic:
			invalid(hs.fields["body"], "body", "body picks steps by a computed key: name them (steps.<name>.output)")
			ok = false
		default:
			for _, ref := range bt.cond.refs {
				if !slices.Contains(deps, ref) {
					invalid(hs.fields["body"], "body", "body reads step %q, which is not a dependency (add it to after or needs)", ref)
					ok = false
				}
			}
			hs.h.Body = bt.render
		}
	}
	if !ok {
		return nil, false
	}
	h := hs.h
	return &h, true
}
