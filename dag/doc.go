// Package dag is dagflow's workflow model: a workflow is a DAG of named
// steps, each running a [steps.Handler], declared in Go with [New] or
// loaded from YAML with [LoadYAML] and friends into the same types.
//
// # Declaring
//
// Per step: dependencies ([After], [Needs]), a retry policy ([Retry]), an
// attempt timeout ([Timeout]), a compensation handler ([Compensate]), a
// condition ([When]) and a queue ([Queue]). Per workflow: [Version],
// [DefaultRetry], [DefaultTimeout], [DefaultQueue] and the events that
// start it ([OnEvent] with a [Filter]). Zero values inherit:
// step from workflow, workflow from [DefaultRetryPolicy],
// [DefaultStepTimeout] and [DefaultQueueName].
//
// [Builder.Build] validates everything at once and returns an immutable
// [Workflow]; each problem is a *[DefinitionError] wrapping a sentinel
// (ErrCycle, ErrUnknownDependency, ErrBadCondition...). Workflow, step and
// queue names are a letter followed by up to 63 letters, digits, '_' or
// '-', because they end up in MySQL rows and Redis keys; a workflow has at
// most [MaxSteps] steps.
//
// # What the engine asks, and what it decides elsewhere
//
// A workflow holds no run state; the engine and the store keep it.
//
// Readiness is decided by the store, not here. When a run is created the
// engine hands the store every step with its dependencies
// ([Workflow.Steps]); the store queues the steps without dependencies and
// keeps, per step, a count of dependencies not yet succeeded or skipped,
// queueing the step when it reaches zero. A step is therefore ready when
// each dependency has succeeded or was skipped; a step with a failed
// dependency never runs.
//
// When it claims a step, the engine asks the workflow two things:
//
//   - [Workflow.ShouldSkip], for a step with [Needs] dependencies: true
//     when one of them was skipped, and the step is marked skipped without
//     running;
//   - [Step.EvalWhen], for a step with a [When] condition: false skips it.
//
// So skips propagate along Needs only:
//
//	a skipped, b After(a)   -> b runs
//	a skipped, b Needs(a)   -> b is skipped, and so is c Needs(b)
//
// When a step is dead-lettered, the completed steps are undone backwards:
// each time the engine advances the saga it asks
// [Workflow.CompensationReady] which compensations may start, given the
// steps' states in the store. A step is compensated once every completed
// step that depends on it, directly or not, has been; independent branches
// are compensated in parallel.
//
// The engine also reads the declaration itself ([Workflow.Step],
// [Workflow.Steps]): handlers, retry policies, timeouts and queues.
//
// # Planning helpers for tools
//
// [Workflow.Order] (a deterministic topological order),
// [Workflow.CompensationOrder] (the whole compensation plan as parallel
// waves), [Workflow.Roots] and [Workflow.Dependents] describe a workflow
// without running it, for tools such as an HTTP API or a dashboard that
// draws a graph or lists what a failure would undo. The engine does not
// call them.
//
// [Workflow.Mermaid] and [Workflow.DOT] draw the graph.
package dag
