// Package dag is dagflow's workflow model: a workflow is a DAG of named
// steps, each running a [steps.Handler], declared in Go with [New] or
// loaded from YAML with [LoadYAML] and friends into the same types.
//
// # Declaring
//
// Per step: dependencies ([After], [Needs]), a retry policy ([Retry]), an
// attempt timeout ([Timeout]), a compensation handler ([Compensate]), a
// condition ([When]) and a queue ([Queue]). Per workflow: [Version],
// [DefaultRetry], [DefaultTimeout] and [DefaultQueue]. Zero values inherit:
// step from workflow, workflow from [DefaultRetryPolicy],
// [DefaultStepTimeout] and [DefaultQueueName].
//
// [Builder.Build] validates everything at once and returns an immutable
// [Workflow]; each problem is a *[ValidationError] wrapping a sentinel
// (ErrCycle, ErrUnknownDependency, ErrBadCondition...). Workflow, step and
// queue names are a letter followed by up to 63 letters, digits, '_' or
// '-', because they end up in MySQL rows and Redis keys; a workflow has at
// most [MaxSteps] steps.
//
// # Planning
//
// The engine asks the workflow what to do; the workflow holds no run
// state. [Workflow.Order] is a deterministic topological order.
// [Workflow.Ready] says which steps to queue and which to skip given the
// outcomes so far. A step is ready when each dependency has succeeded or
// was skipped. Skips propagate along [Needs] only:
//
//	a skipped, b After(a)   -> b runs
//	a skipped, b Needs(a)   -> b is skipped, and so is c Needs(b)
//
// A step's [When] condition is evaluated ([Step.EvalWhen]) when it is
// ready; false skips it.
//
// When a step is dead-lettered, the completed steps are undone backwards
// ([Workflow.CompensationReady], [Workflow.CompensationOrder]): a step is
// compensated once every completed step that depends on it, directly or
// not, has been; independent branches are compensated in parallel.
//
// [Workflow.Mermaid] and [Workflow.DOT] draw the graph.
package dag
