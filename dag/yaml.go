package dag

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dagflow/dagflow/internal/yamlwalk"
	"github.com/dagflow/dagflow/steps"
)

// Errors of the YAML loader, found in a *[YAMLError]'s Err.
var (
	ErrUnknownField = errors.New("dag: unknown field")
	ErrMissingField = errors.New("dag: missing field")
	// ErrWorkflowDefinedTwice reports two files defining the same workflow.
	ErrWorkflowDefinedTwice = errors.New("dag: duplicate workflow")
)

// LoadYAML reads one workflow from YAML and builds it, resolving handler
// names in reg. filename is only used in error messages. The format:
//
//	name: order                 # required
//	version: 1                  # default 1
//	on:                         # optional: the events that start it
//	  - event: order.placed     # required
//	    when: event.total >= 100
//	example_input: {order_id: o-1, total: 120}   # optional: ExampleInput
//	input_schema:               # optional: InputSchema, a JSON Schema in YAML
//	  type: object
//	  required: [total]
//	defaults:                   # all optional
//	  retry: {max_attempts: 5, initial_backoff: 1s, max_backoff: 1m, multiplier: 2, jitter: 1}
//	  timeout: 30s
//	  queue: default
//	steps:                      # required, at least one
//	  - name: reserve           # required
//	    handler: order.reserve  # required: a name registered in reg
//	    compensate: order.release
//	    timeout: 10s
//	    retry: {max_attempts: 3}
//	    queue: stock
//	    concurrency: {key: input.customer_id, limit: 1}   # ConcurrencyKey
//	    rate_limit: {rate: 100, per: 1m, burst: 5, per_key: input.customer_id}
//	  - name: points
//	    handler: order.points
//	    after: [reserve]        # or needs: [...]; a single name works too
//	    when: input.total >= 100
//	  - name: charge            # a built-in HTTP call: no handler, no Go code
//	    kind: http
//	    url: https://pay.example/charges   # required
//	    method: POST            # default POST with a body, GET without
//	    headers: {Authorization: "Bearer ${env:PAY_TOKEN}"}
//	    headers_from_env: {X-Api-Key: PAY_KEY}
//	    body: '{"order": input.order_id, "stock": steps.reserve.output}'
//	    max_response_bytes: 1048576
//	    max_retry_after: 5m
//	    needs: [reserve]        # the body may read only its dependencies
//
// Durations are Go duration strings ("1m30s"). The meaning is the one of
// the Go options (After, Needs, Retry, Timeout, Compensate, When, Queue,
// ConcurrencyKey, RateLimit with RateBurst and PerKey);
// omitted fields inherit the same way; `on` is [OnEvent] with [Filter]. One difference: an explicit
// `jitter: 0` means no jitter (in Go a zero Jitter inherits; see NoJitter).
//
// A `kind: http` step runs a *[steps.HTTP] (see there for how the
// response decides the outcome); its body is an expr expression over
// input and steps.<name>.output, as a `when` sees them, whose value is
// sent as JSON. Its stored definition records the kind, url, method and
// header names, never a header's value.
//
// Unknown fields, wrong types and unknown handlers are errors; so is every
// validation error of [Builder.Build]. Each is a *[YAMLError] with the
// file, line, column and field (several are joined with errors.Join); a
// validation error is reachable with errors.As(err, **DefinitionError) and
// its sentinel with errors.Is.
func LoadYAML(data []byte, filename string, reg *steps.Registry) (*Workflow, error) {
	l := newLoader(filename, reg)
	root := l.Document(data, "a mapping with name and steps", "one workflow per file")
	if root == nil {
		return nil, l.Err()
	}
	w, err := l.workflow(root)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// LoadFile reads one workflow from a YAML file (see [LoadYAML]).
func LoadFile(name string, reg *steps.Registry) (*Workflow, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("dag: %w", err)
	}
	return LoadYAML(data, name, reg)
}

// LoadDir reads every *.yaml and *.yml file of dir (not its
// subdirectories), one workflow per file, in file name order. See
// [LoadFS].
func LoadDir(dir string, reg *steps.Registry) ([]*Workflow, error) {
	return loadFS(os.DirFS(dir), reg, func(name string) string { return filepath.Join(dir, name) })
}

// LoadFS reads every *.yaml and *.yml file at the root of fsys (an
// embed.FS of workflow definitions, say), one workflow per file, in file
// name order. All files are read; the problems of every file are returned
// together. Two files defining the same workflow name are an error
// wrapping [ErrWorkflowDefinedTwice].
func LoadFS(fsys fs.FS, reg *steps.Registry) ([]*Workflow, error) {
	return loadFS(fsys, reg, func(name string) string { return name })
}

func loadFS(fsys fs.FS, reg *steps.Registry, display func(string) string) ([]*Workflow, error) {
	names, err := yamlwalk.Files(fsys)
	if err != nil {
		return nil, fmt.Errorf("dag: %w", err)
	}
	var (
		out  []*Workflow
		errs []error
		seen = make(map[string]string) // workflow -> file
	)
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("dag: %w", err))
			continue
		}
		w, err := LoadYAML(data, display(name), reg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[w.Name()]; dup {
			errs = append(errs, &YAMLError{File: display(name), Field: "name", ours: true,
				Err: fmt.Errorf("%w: workflow %q is also defined in %s", ErrWorkflowDefinedTwice, w.Name(), prev)})
			continue
		}
		seen[w.Name()] = display(name)
		out = append(out, w)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// loader walks the YAML node tree (with the strict walker shared with the
// schedules loader), so that every problem has a line and column and
// unknown fields are caught.
type loader struct {
	yamlwalk.Walker
	reg *steps.Registry
	// onNode is the workflow's `on` list, where subscription errors
	// point; inputNodes the example_input and input_schema values.
	onNode     *yaml.Node
	inputNodes map[string]*yaml.Node
}

func newLoader(file string, reg *steps.Registry) *loader {
	l := &loader{reg: reg}
	l.UnknownField = ErrUnknownField
	l.NewError = func(line, column int, field string, err error) error {
		return &YAMLError{File: file, Line: line, Column: column, Field: field, Err: err, ours: true}
	}
	return l
}

// names decodes a step name or a list of them.
func (l *loader) names(n *yaml.Node, field string) []string {
	if n.Kind == yaml.ScalarNode {
		if s, ok := l.Str(n, field); ok {
			return []string{s}
		}
		return nil
	}
	items, ok := l.List(n, field, "a step name or a list of them")
	if !ok {
		return nil
	}
	var out []string
	for i, c := range items {
		if s, ok := l.Str(c, fmt.Sprintf("%s[%d]", field, i)); ok {
			out = append(out, s)
		}
	}
	return out
}

func (l *loader) handler(n *yaml.Node, field string) steps.Handler {
	name, ok := l.Str(n, field)
	if !ok {
		return nil
	}
	if l.reg != nil {
		if h, ok := l.reg.Lookup(name); ok {
			return h
		}
	}
	l.Fail(n, field, fmt.Errorf("%w %q (not in the registry)", ErrUnknownHandler, name))
	return nil
}

func (l *loader) retry(n *yaml.Node, field string) RetryPolicy {
	var p RetryPolicy
	if !l.Mapping(n, field, "a mapping") {
		return p
	}
	known := []string{"max_attempts", "initial_backoff", "max_backoff", "multiplier", "jitter"}
	l.Fields(n, field, known, func(key string, _, v *yaml.Node) {
		f := yamlwalk.Join(field, key)
		switch key {
		case "max_attempts":
			p.MaxAttempts, _ = l.Int(v, f)
		case "initial_backoff":
			p.InitialBackoff, _ = l.Duration(v, f)
		case "max_backoff":
			p.MaxBackoff, _ = l.Duration(v, f)
		case "multiplier":
			p.Multiplier, _ = l.Float(v, f)
		case "jitter":
			if j, ok := l.Float(v, f); ok {
				p.Jitter = j
				if j == 0 {
					p.Jitter = NoJitter
				}
			}
		}
	})
	return p
}

// concurrency reads a step's concurrency: {key, limit} (ConcurrencyKey).
func (l *loader) concurrency(n *yaml.Node, field string) StepOption {
	if !l.Mapping(n, field, "a mapping with key and limit") {
		return nil
	}
	var (
		key   string
		limit int
	)
	l.Fields(n, field, []string{"key", "limit"}, func(k string, _, v *yaml.Node) {
		switch k {
		case "key":
			key, _ = l.Str(v, yamlwalk.Join(field, k))
		case "limit":
			limit, _ = l.Int(v, yamlwalk.Join(field, k))
		}
	})
	return ConcurrencyKey(key, limit)
}

// rateLimit reads a step's rate_limit: {rate, per, burst, per_key}
// (RateLimit).
func (l *loader) rateLimit(n *yaml.Node, field string) StepOption {
	if !l.Mapping(n, field, "a mapping with rate and per") {
		return nil
	}
	var (
		rate int
		per  time.Duration
		opts []RateOption
	)
	l.Fields(n, field, []string{"rate", "per", "burst", "per_key"}, func(k string, _, v *yaml.Node) {
		f := yamlwalk.Join(field, k)
		switch k {
		case "rate":
			rate, _ = l.Int(v, f)
		case "per":
			per, _ = l.Duration(v, f)
		case "burst":
			if b, ok := l.Int(v, f); ok {
				opts = append(opts, RateBurst(b))
			}
		case "per_key":
			if e, ok := l.Str(v, f); ok {
				opts = append(opts, PerKey(e))
			}
		}
	})
	return RateLimit(rate, per, opts...)
}

// waitFor reads a step's wait_for: {event, correlate, timeout} or
// {signal: true, timeout}.
func (l *loader) waitFor(n *yaml.Node, field string) StepOption {
	if !l.Mapping(n, field, "a mapping with event and correlate, or signal: true") {
		return nil
	}
	var (
		event, signal string
		opts          []WaitOption
	)
	l.Fields(n, field, []string{"event", "correlate", "timeout", "signal"}, func(key string, _, v *yaml.Node) {
		f := yamlwalk.Join(field, key)
		switch key {
		case "event":
			event, _ = l.Str(v, f)
		case "correlate":
			if e, ok := l.Str(v, f); ok {
				opts = append(opts, Correlate(e))
			}
		case "timeout":
			if d, ok := l.Duration(v, f); ok {
				opts = append(opts, WaitTimeout(d))
			}
		case "signal":
			signal, _ = l.Str(v, f)
		}
	})
	switch {
	case signal == "true" && event == "":
		return WaitForSignal(opts...)
	case signal != "" && signal != "false":
		l.Failf(n, field, "signal: want true (a wait for a signal) or an event, not %q", signal)
		return nil
	}
	return WaitFor(event, opts...)
}

// child reads a step's child: {workflow, input, timeout}.
func (l *loader) child(n *yaml.Node, field string) StepOption {
	if !l.Mapping(n, field, "a mapping with workflow, and optionally input and timeout") {
		return nil
	}
	var (
		workflow string
		opts     []WaitOption
	)
	l.Fields(n, field, []string{"workflow", "input", "timeout"}, func(key string, _, v *yaml.Node) {
		f := yamlwalk.Join(field, key)
		switch key {
		case "workflow":
			workflow, _ = l.Str(v, f)
		case "input":
			if e, ok := l.Str(v, f); ok {
				opts = append(opts, Input(e))
			}
		case "timeout":
			if d, ok := l.Duration(v, f); ok {
				opts = append(opts, WaitTimeout(d))
			}
		}
	})
	if workflow == "" {
		l.Fail(n, yamlwalk.Join(field, "workflow"), fmt.Errorf("%w: a child step needs the workflow it starts", ErrMissingField))
		return nil
	}
	return Child(workflow, opts...)
}

// stepNode remembers where a step was declared, to locate build errors.
type stepNode struct {
	name   string
	node   *yaml.Node
	fields map[string]*yaml.Node // key -> key node
	path   string
}

func (l *loader) workflow(root *yaml.Node) (*Workflow, error) {
	var (
		name     string
		opts     []WorkflowOption
		nameNode = root
		stepsSet bool
		decls    []stepNode
		b        = &Builder{}
	)
	known := append([]string{"name", "version", "on", "defaults", "steps"}, inputKeys...)
	l.Fields(root, "", known, func(key string, k, v *yaml.Node) {
		switch key {
		case "example_input", "input_schema":
			if o := l.inputOption(key, v); o != nil {
				opts = append(opts, o)
			}
		case "name":
			name, _ = l.Str(v, key)
			nameNode = v
		case "version":
			if ver, ok := l.Int(v, key); ok {
				opts = append(opts, Version(ver))
			}
		case "defaults":
			opts = append(opts, l.defaults(v)...)
		case "on":
			l.onNode = v
			opts = append(opts, l.subscriptions(v)...)
		case "steps":
			stepsSet = true
			items, ok := l.List(v, key, "a list of steps")
			if !ok {
				return
			}
			for i, sn := range items {
				if d, ok := l.step(b, sn, fmt.Sprintf("steps[%d]", i)); ok {
					decls = append(decls, d)
				}
			}
		}
	})
	if nameNode == root {
		l.Fail(root, "name", fmt.Errorf("%w: the workflow needs a name", ErrMissingField))
	}
	if !stepsSet {
		l.Fail(root, "steps", fmt.Errorf("%w: the workflow needs steps", ErrMissingField))
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	b.name, b.opts = name, opts
	w, err := b.Build()
	if err != nil {
		l.locate(err, root, nameNode, decls)
		return nil, l.Err()
	}
	return w, nil
}

// subscriptions decodes the `on` list.
func (l *loader) subscriptions(n *yaml.Node) []WorkflowOption {
	items, ok := l.List(n, "on", "a list of {event, when} mappings")
	if !ok {
		return nil
	}
	var opts []WorkflowOption
	for i, item := range items {
		path := fmt.Sprintf("on[%d]", i)
		if !l.Mapping(item, path, "a mapping with event and when") {
			continue
		}
		var event, when string
		haveEvent := false
		l.Fields(item, path, []string{"event", "when"}, func(key string, _, v *yaml.Node) {
			switch key {
			case "event":
				event, haveEvent = l.Str(v, path+".event")
			case "when":
				when, _ = l.Str(v, path+".when")
			}
		})
		if !haveEvent {
			l.Fail(item, path+".event", fmt.Errorf("%w: every subscription needs an event", ErrMissingField))
			continue
		}
		opts = append(opts, OnEvent(event, Filter(when)))
	}
	return opts
}

func (l *loader) defaults(n *yaml.Node) []WorkflowOption {
	if !l.Mapping(n, "defaults", "a mapping") {
		return nil
	}
	var opts []WorkflowOption
	l.Fields(n, "defaults", []string{"retry", "timeout", "queue"}, func(key string, _, v *yaml.Node) {
		f := "defaults." + key
		switch key {
		case "retry":
			opts = append(opts, DefaultRetry(l.retry(v, f)))
		case "timeout":
			if d, ok := l.Duration(v, f); ok {
				opts = append(opts, DefaultTimeout(d))
			}
		case "queue":
			if q, ok := l.Str(v, f); ok {
				opts = append(opts, DefaultQueue(q))
			}
		}
	})
	return opts
}

func (l *loader) step(b *Builder, n *yaml.Node, path string) (stepNode, bool) {
	d := stepNode{node: n, path: path, fields: make(map[string]*yaml.Node)}
	if !l.Mapping(n, path, "a step mapping") {
		return d, false
	}
	var (
		h    steps.Handler
		opts []StepOption
		ok   = true
		hs   httpStep
		deps []string
	)
	known := append([]string{"name", "kind", "handler", "after", "needs", "when", "retry", "timeout", "compensate", "queue",
		"wait_for", "sleep", "sleep_until", "concurrency", "rate_limit", "child"}, httpFields...)
	l.Fields(n, path, known, func(key string, k, v *yaml.Node) {
		d.fields[key] = v
		f := path + "." + key
		before := l.Problems()
		switch key {
		case "name":
			d.name, _ = l.Str(v, f)
		case "kind":
			hs.kind, _ = l.Str(v, f)
			hs.kindNode = v
		case "handler":
			h = l.handler(v, f)
		case "after":
			names := l.names(v, f)
			deps = append(deps, names...)
			opts = append(opts, After(names...))
		case "needs":
			names := l.names(v, f)
			deps = append(deps, names...)
			opts = append(opts, Needs(names...))
		case "when":
			if s, ok := l.Str(v, f); ok {
				opts = append(opts, When(s))
			}
		case "retry":
			opts = append(opts, Retry(l.retry(v, f)))
		case "timeout":
			if t, ok := l.Duration(v, f); ok {
				opts = append(opts, Timeout(t))
			}
		case "compensate":
			opts = append(opts, Compensate(l.handler(v, f)))
		case "queue":
			if q, ok := l.Str(v, f); ok {
				opts = append(opts, Queue(q))
			}
		case "wait_for":
			if o := l.waitFor(v, f); o != nil {
				opts = append(opts, o)
			}
		case "child":
			if o := l.child(v, f); o != nil {
				opts = append(opts, o)
			}
		case "sleep":
			if d, ok := l.Duration(v, f); ok {
				opts = append(opts, Sleep(d))
			}
		case "sleep_until":
			if e, ok := l.Str(v, f); ok {
				opts = append(opts, SleepUntil(e))
			}
		case "concurrency":
			opts = append(opts, l.concurrency(v, f))
		case "rate_limit":
			opts = append(opts, l.rateLimit(v, f))
		default: // the fields of kind: http
			l.httpField(&hs, key, f, v)
		}
		if l.Problems() > before {
			ok = false
		}
	})
	if d.fields["name"] == nil {
		l.Fail(n, path+".name", fmt.Errorf("%w: every step needs a name", ErrMissingField))
		ok = false
	}
	waits := d.fields["wait_for"] != nil || d.fields["sleep"] != nil || d.fields["sleep_until"] != nil || d.fields["child"] != nil
	if d.fields["handler"] == nil && hs.kindNode == nil && !waits {
		// A wait, sleep or child step runs no handler.
		l.Fail(n, path+".handler", fmt.Errorf("%w: every step needs a handler (or kind: http, wait_for, sleep, sleep_until or child)", ErrMissingField))
		ok = false
	}
	if !ok {
		return d, false
	}
	hh, valid := l.httpHandler(&hs, d, deps, d.fields["handler"])
	if !valid {
		return d, false
	}
	if hh != nil {
		h = hh
	}
	b.Step(d.name, h, opts...)
	return d, true
}

// locate turns the build errors into YAMLErrors pointing at the step (and
// field) they are about.
func (l *loader) locate(err error, root, nameNode *yaml.Node, decls []stepNode) {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	dupSeen := make(map[string]int)
	for _, e := range list {
		var ve *DefinitionError
		if !errors.As(e, &ve) {
			l.Fail(root, "", e)
			continue
		}
		if ve.Step == "" {
			switch {
			case l.locateInput(ve):
			case errors.Is(ve, ErrBadFilter) && l.onNode != nil:
				l.Fail(l.onNode, "on", ve)
			case errors.Is(ve, ErrInvalidName) && ve.Reason != "" && nameNode != root && !isQueueReason(ve):
				l.Fail(nameNode, "name", ve)
			case errors.Is(ve, ErrEmptyWorkflow) || errors.Is(ve, ErrTooManySteps):
				l.Fail(root, "steps", ve)
			case strings.Contains(ve.Reason, "default"):
				l.Fail(root, "defaults", ve)
			case strings.HasPrefix(ve.Reason, "version"):
				l.Fail(root, "version", ve)
			default:
				l.Fail(root, "", ve)
			}
			continue
		}
		// The step the error is about: for a duplicate, its second
		// declaration.
		idx := -1
		skip := 0
		if errors.Is(ve, ErrDuplicateStep) {
			dupSeen[ve.Step]++
			skip = dupSeen[ve.Step]
		}
		for i, d := range decls {
			if d.name == ve.Step {
				if skip == 0 {
					idx = i
					break
				}
				skip--
			}
		}
		if idx < 0 {
			l.Fail(root, "", ve)
			continue
		}
		d := decls[idx]
		field, node := d.path, d.node
		key := ""
		switch {
		case errors.Is(ve, ErrBadCondition):
			key = "when"
		case errors.Is(ve, ErrUnknownDependency), errors.Is(ve, ErrSelfDependency), errors.Is(ve, ErrCycle):
			key = "after"
			if d.fields["after"] == nil {
				key = "needs"
			}
		case errors.Is(ve, ErrInvalidName):
			key = "name"
			if isQueueReason(ve) {
				key = "queue"
			}
		case errors.Is(ve, ErrInvalidOption):
			key = "retry"
			if strings.Contains(ve.Reason, "timeout") {
				key = "timeout"
			}
		case errors.Is(ve, ErrDuplicateStep):
			key = "name"
		}
		if v := d.fields[key]; v != nil {
			field, node = d.path+"."+key, v
		}
		l.Fail(node, field, ve)
	}
}

func isQueueReason(ve *DefinitionError) bool { return strings.Contains(ve.Reason, "queue name") }
