package dag

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/steps"
)

// MaxSteps is the most steps a workflow may have. It keeps a run's rows,
// its plan and its dashboard view small.
const MaxSteps = 256

// Defaults for what neither the step nor the workflow sets.
const (
	DefaultStepTimeout = 5 * time.Minute
	DefaultQueueName   = "default"
)

// nameRule explains a name that is not valid (see [ValidName]).
const nameRule = "want " + names.Rule

// ValidName reports whether s is allowed as a workflow, step or queue name:
// a letter followed by up to 63 letters, digits, '_' or '-'. Names end up
// in MySQL rows and Redis keys ("dagflow:{<queue>}:..."), so no '/', '{',
// '}', ':' or spaces. The stores and the queue check the same rule.
func ValidName(s string) bool { return names.Valid(s) }

// Builder declares a workflow step by step; [Builder.Build] validates it.
// Its methods return the builder so that a declaration reads like the
// problem:
//
//	dag.New("order").
//		Step("reserve", reserve, dag.Compensate(release)).
//		Step("notify", notify, dag.After("reserve")).
//		Step("points", points, dag.After("reserve"), dag.When("input.total >= 100")).
//		Step("ship", ship, dag.After("notify", "points")).
//		Build()
//
// Nothing is checked before Build, which reports every problem at once.
type Builder struct {
	name  string
	opts  []WorkflowOption
	decls []stepDecl
}

type stepDecl struct {
	name string
	h    steps.Handler
	opts []StepOption
}

// New starts the declaration of the workflow called name.
func New(name string, opts ...WorkflowOption) *Builder {
	return &Builder{name: name, opts: slices.Clone(opts)}
}

// Step declares a step running h. Steps may be declared in any order: the
// dependencies given with [After] and [Needs] decide the plan, and the
// declaration order only breaks ties.
func (b *Builder) Step(name string, h steps.Handler, opts ...StepOption) *Builder {
	b.decls = append(b.decls, stepDecl{name: name, h: h, opts: slices.Clone(opts)})
	return b
}

// WorkflowOption configures a workflow in [New].
type WorkflowOption func(*workflowConfig)

type workflowConfig struct {
	version int
	retry   RetryPolicy
	timeout time.Duration
	queue   string
	on      []subscriptionDecl

	example    any // ExampleInput
	exampleSet bool
	schema     []byte // InputSchema
	schemaSet  bool
}

// Version sets the workflow's version (default 1), recorded with each run
// so that a changed definition can be told apart from the one a run
// started with.
func Version(v int) WorkflowOption { return func(c *workflowConfig) { c.version = v } }

// DefaultRetry sets the retry policy of the steps that set none. Its zero
// fields inherit from [DefaultRetryPolicy].
func DefaultRetry(p RetryPolicy) WorkflowOption { return func(c *workflowConfig) { c.retry = p } }

// DefaultTimeout sets the attempt timeout of the steps that set none
// (default [DefaultStepTimeout]).
func DefaultTimeout(d time.Duration) WorkflowOption {
	return func(c *workflowConfig) { c.timeout = d }
}

// DefaultQueue sets the queue of the steps that set none (default
// [DefaultQueueName]).
func DefaultQueue(name string) WorkflowOption { return func(c *workflowConfig) { c.queue = name } }

// StepOption configures a step in [Builder.Step].
type StepOption func(*stepConfig)

type stepConfig struct {
	deps     []string        // After and Needs, in the order given
	needs    map[string]bool // deps given with Needs
	retry    RetryPolicy
	timeout  time.Duration
	comp     steps.Handler
	compSet  bool
	when     string
	queue    string
	queueSet bool
	wait     *Wait
	http     *HTTPDefinition // storedHTTP
	lim      *Limits         // ConcurrencyKey, RateLimit
}

// storedHTTP keeps, on a step built from a stored definition, the kind
// and target of an HTTP step whose handler the node may not have.
func storedHTTP(h *HTTPDefinition) StepOption {
	return func(c *stepConfig) { c.http = h }
}

func (c *stepConfig) addDeps(deps []string, hard bool) {
	for _, d := range deps {
		if !slices.Contains(c.deps, d) {
			c.deps = append(c.deps, d)
		}
		if hard {
			if c.needs == nil {
				c.needs = make(map[string]bool)
			}
			c.needs[d] = true
		}
	}
}

// After makes the step wait for deps. A dependency that was skipped counts
// as done: the step still runs (its `when` decides). Use it for ordering
// ("ship after notify, whether or not a notification was due").
func After(deps ...string) StepOption {
	return func(c *stepConfig) { c.addDeps(deps, false) }
}

// Needs makes the step wait for deps, like [After], and also depend on
// their results: if one of them was skipped, this step is skipped too,
// and the skip propagates to the steps that need this one. A dependency
// given with both After and Needs is a Needs.
func Needs(deps ...string) StepOption {
	return func(c *stepConfig) { c.addDeps(deps, true) }
}

// Retry sets the step's retry policy; its zero fields inherit from the
// workflow's [DefaultRetry].
func Retry(p RetryPolicy) StepOption { return func(c *stepConfig) { c.retry = p } }

// Timeout bounds each attempt of the step (and of its compensation): the
// handler's context ends after d. Zero inherits the workflow's
// [DefaultTimeout].
func Timeout(d time.Duration) StepOption { return func(c *stepConfig) { c.timeout = d } }

// Compensate sets the handler that undoes the step when a later step is
// dead-lettered (the saga pattern). It gets the same idempotency key as
// the step, with Context.Compensation set and the step's own output in
// Context.Outputs.
func Compensate(h steps.Handler) StepOption {
	return func(c *stepConfig) { c.comp, c.compSet = h, true }
}

// When sets the condition under which the step runs, an expr expression
// evaluated when the step becomes ready; false skips it. See
// [Step.EvalWhen] for the environment and the handling of missing fields.
// It is compiled by Build: a condition that does not compile, or that has
// more than [MaxWhenNodes] nodes, is a build error. The engine runs it,
// as every expression, under a time budget (engine.Config.WhenBudget,
// see [WithExprBudget]).
func When(expr string) StepOption { return func(c *stepConfig) { c.when = expr } }

// Queue sets the queue the step's tasks go to (default: the workflow's
// [DefaultQueue]), so that slow or rate-limited steps get their own
// workers.
func Queue(name string) StepOption {
	return func(c *stepConfig) { c.queue, c.queueSet = name, true }
}

// Build validates the declaration and returns the immutable workflow.
//
// Every problem found is reported, each as a *[DefinitionError] wrapping
// one of the sentinels (ErrInvalidName, ErrEmptyWorkflow, ErrTooManySteps,
// ErrDuplicateStep, ErrStepWithoutHandler, ErrInvalidOption,
// ErrSelfDependency, ErrUnknownDependency, ErrCycle, ErrBadCondition,
// ErrBadFilter, ErrBadSchema, ErrBadExample). A single problem is
// returned as is; several are combined with errors.Join, so use errors.Is
// and errors.As rather than a type assertion.
func (b *Builder) Build() (*Workflow, error) {
	v := validator{workflow: b.name}
	if !ValidName(b.name) {
		v.add("", ErrInvalidName, "invalid workflow name %q (%s)", b.name, nameRule)
	}

	cfg := workflowConfig{version: 1, retry: DefaultRetryPolicy(), timeout: DefaultStepTimeout, queue: DefaultQueueName}
	for _, o := range b.opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.version == 0 {
		cfg.version = 1
	}
	if cfg.version < 0 {
		v.add("", ErrInvalidOption, "version %d, want at least 1", cfg.version)
	}
	cfg.retry = cfg.retry.inherit(DefaultRetryPolicy())
	defaultsOK := true
	if err := cfg.retry.resolved().check(); err != nil {
		v.add("", ErrInvalidOption, "default retry policy: %v", err)
		defaultsOK = false
	}
	if cfg.timeout == 0 {
		cfg.timeout = DefaultStepTimeout
	}
	if cfg.timeout < 0 {
		v.add("", ErrInvalidOption, "default timeout %s is negative", cfg.timeout)
	}
	if cfg.queue == "" {
		cfg.queue = DefaultQueueName
	}
	if !ValidName(cfg.queue) {
		v.add("", ErrInvalidName, "invalid default queue name %q (%s)", cfg.queue, nameRule)
	}

	switch n := len(b.decls); {
	case n == 0:
		v.add("", ErrEmptyWorkflow, "no steps")
	case n > MaxSteps:
		v.add("", ErrTooManySteps, "%d steps, more than the limit of %d", n, MaxSteps)
	}

	w := &Workflow{name: b.name, version: cfg.version, index: make(map[string]int, len(b.decls))}
	w.on = subscriptions(&v, b.name, cfg.on)
	w.input = buildInput(&v, cfg)
	for _, d := range b.decls {
		if _, dup := w.index[d.name]; dup {
			v.add(d.name, ErrDuplicateStep, "step %q declared twice", d.name)
			continue
		}
		w.index[d.name] = len(w.steps)
		w.steps = append(w.steps, b.step(&v, cfg, defaultsOK, d))
	}
	for _, s := range w.steps {
		for _, dep := range s.Deps {
			switch _, known := w.index[dep]; {
			case dep == s.Name:
				v.add(s.Name, ErrSelfDependency, "step %q depends on itself", s.Name)
			case !known:
				v.add(s.Name, ErrUnknownDependency, "step %q depends on unknown step %q", s.Name, dep)
			}
		}
	}
	w.link()
	if cycle := w.findCycle(); cycle != nil {
		v.add(cycle[0], ErrCycle, "dependency cycle: %s", strings.Join(cycle, " -> "))
	} else {
		w.order = w.topoOrder()
	}
	for _, s := range w.steps {
		s.reads = s.Deps
		if s.Wait != nil && len(s.Wait.refs) > 0 {
			up := w.upstream(s.Name)
			for _, ref := range s.Wait.refs {
				switch {
				case !up[ref]:
					v.add(s.Name, ErrBadCondition, "step %q: its wait refers to step %q, which is not upstream of %q", s.Name, ref, s.Name)
				case !slices.Contains(s.reads, ref):
					s.reads = append(slices.Clone(s.reads), ref)
				}
			}
		}
		if s.cond == nil {
			continue
		}
		up := w.upstream(s.Name)
		for _, ref := range s.cond.refs {
			if !up[ref] {
				v.add(s.Name, ErrBadCondition, "step %q: when %q refers to step %q, which is not upstream of %q", s.Name, s.When, ref, s.Name)
			}
		}
		s.reads = s.condReads(up)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return w, nil
}

// step resolves one declaration against the workflow defaults.
// A problem inherited from the workflow defaults is reported once, by
// Build, not again for every step.
func (b *Builder) step(v *validator, cfg workflowConfig, defaultsOK bool, d stepDecl) *Step {
	c := stepConfig{}
	for _, o := range d.opts {
		if o != nil {
			o(&c)
		}
	}
	s := &Step{
		Name:         d.name,
		Deps:         c.deps,
		Handler:      d.h,
		Compensation: c.comp,
		Retry:        c.retry.inherit(cfg.retry).resolved(),
		Timeout:      c.timeout,
		Queue:        c.queue,
		When:         c.when,
		Wait:         c.wait,
		workflow:     b.name,
		http:         c.http,
		Limits:       c.lim,
	}
	for _, dep := range c.deps {
		if c.needs[dep] {
			s.Needs = append(s.Needs, dep)
		}
	}
	if !ValidName(d.name) {
		v.add(d.name, ErrInvalidName, "invalid step name %q (%s)", d.name, nameRule)
	}
	switch {
	case c.wait != nil:
		// A wait step runs no handler: it is parked. A plan built from a
		// definition hands it its stand-in or the node's wait handler.
		if !steps.IsNil(d.h) && !isNoHandler(d.h) && !isWaitHandler(d.h) {
			v.add(d.name, ErrInvalidOption, "step %q: a wait or sleep step takes no handler (give nil)", d.name)
		}
		s.Handler = waitHandler{}
		c.wait.check(v, d.name)
	case steps.IsNil(d.h):
		v.add(d.name, ErrStepWithoutHandler, "step %q: nil handler", d.name)
	}
	if c.compSet && steps.IsNil(c.comp) {
		v.add(d.name, ErrStepWithoutHandler, "step %q: nil compensation handler", d.name)
		s.Compensation = nil
	}
	if err := s.Retry.check(); err != nil && defaultsOK {
		v.add(d.name, ErrInvalidOption, "step %q: retry policy: %v", d.name, err)
	}
	if s.Timeout == 0 {
		s.Timeout = cfg.timeout
	}
	if s.Timeout < 0 {
		v.add(d.name, ErrInvalidOption, "step %q: timeout %s is negative", d.name, s.Timeout)
	}
	if !c.queueSet || s.Queue == "" {
		s.Queue = cfg.queue
	} else if !ValidName(s.Queue) {
		v.add(d.name, ErrInvalidName, "step %q: invalid queue name %q (%s)", d.name, s.Queue, nameRule)
	}
	if s.Limits != nil {
		s.Limits.check(v, d.name)
	}
	if s.When != "" {
		cond, err := compileWhen(s.When)
		if err != nil {
			v.add(d.name, ErrBadCondition, "step %q: when %q does not compile: %v", d.name, s.When, err)
		} else {
			s.cond = cond
		}
	}
	return s
}

// validator collects the problems of one Build.
type validator struct {
	workflow string
	errs     []error
}

func (v *validator) add(step string, sentinel error, format string, args ...any) {
	v.errs = append(v.errs, &DefinitionError{
		Workflow: v.workflow,
		Step:     step,
		Reason:   fmt.Sprintf(format, args...),
		Err:      sentinel,
	})
}

func (v *validator) err() error {
	switch len(v.errs) {
	case 0:
		return nil
	case 1:
		return v.errs[0]
	}
	return errors.Join(v.errs...)
}
