// Package steps is the contract between dagflow and the code that does the
// work: a step is a [Handler] that receives a [Context] (run id, step name,
// attempt, a stable idempotency key, the run input and the outputs of the
// steps it depends on) and returns a JSON output or an error.
//
// [HandlerFunc] adapts a plain function and [Typed] does the JSON encoding
// for the user. Errors steer retries: a plain error is retried with the
// step's backoff until its attempts run out, [Permanent] dead-letters the
// step at once, and [RetryAfter] asks for a specific delay before the next
// attempt. A panic inside a handler is recovered by [Call] and reported as a
// *[PanicError]; it counts as an ordinary failed attempt.
//
// [HTTP] is the built-in step that calls an HTTP endpoint (`kind: http`
// in YAML): it sends the step's idempotency key on every attempt and maps
// the response's status to a success, a retry (honouring Retry-After) or a
// permanent failure.
//
// A [Registry] names handlers so that workflows declared in YAML can refer to
// them. The package imports only the standard library: the engine, the dag
// model and user code all depend on it, and it depends on none of them.
package steps
