package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/dagflow/dagflow/internal/jsoncheck"
)

// Handler runs one step. It returns the step's output as JSON (nil or empty
// means no output, stored as null) or an error: see [Permanent] and
// [RetryAfter] for the errors that steer retries.
//
// The context ends at the step's timeout or when the run is cancelled;
// handlers must return promptly when it does. Delivery is at least once:
// a handler may run again after a crash, so side effects should use
// [Context].IdempotencyKey.
type Handler interface {
	Handle(ctx context.Context, sc Context) (json.RawMessage, error)
}

// HandlerFunc adapts an ordinary function to [Handler].
type HandlerFunc func(ctx context.Context, sc Context) (json.RawMessage, error)

// Handle calls f(ctx, sc).
func (f HandlerFunc) Handle(ctx context.Context, sc Context) (json.RawMessage, error) {
	return f(ctx, sc)
}

// Typed adapts a function on Go values to [Handler]: the run input is
// decoded into In and the returned Out is encoded as the step's output.
// An input that is not valid JSON for In is a [Permanent] error (retrying
// cannot fix it) naming the step and the type; so is an Out that cannot be
// encoded. Errors returned by fn are passed through unchanged. A nil fn
// gives a nil Handler, which registries and builders reject.
func Typed[In, Out any](fn func(ctx context.Context, sc Context, in In) (Out, error)) Handler {
	if fn == nil {
		return nil
	}
	return HandlerFunc(func(ctx context.Context, sc Context) (json.RawMessage, error) {
		var in In
		if err := sc.DecodeInput(&in); err != nil {
			return nil, Permanent(err)
		}
		out, err := fn(ctx, sc, in)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, Permanent(fmt.Errorf("steps: step %q: encode output %T: %w", sc.Step, out, err))
		}
		return b, nil
	})
}

// PanicError reports a panic inside a handler, recovered by [Call]. A panic
// counts as a failed attempt like any other error: the step is retried
// until its attempts run out (panic with a [Permanent] error to stop at
// once). The engine records Error() as the attempt's error and Stack in
// the run's history.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic (runtime/debug.Stack).
	Stack []byte
}

// Error returns "steps: panic: <value>".
func (e *PanicError) Error() string { return fmt.Sprintf("steps: panic: %v", e.Value) }

// Unwrap returns Value when it is an error, so errors.Is and errors.As see
// through a panic(err).
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// ErrNilHandler is returned when a nil handler is registered or called.
var ErrNilHandler = errors.New("steps: nil handler")

// Call runs h with the context defaults filled in (see [Context]) and
// turns what can go wrong around it into errors:
//
//   - a panic becomes a *[PanicError] holding the value and the stack;
//   - a nil h gives an error wrapping [ErrNilHandler];
//   - an output that is not valid JSON, or is nested too deeply to
//     decode, gives a [Permanent] error saying which.
//
// The engine runs every handler and compensation through Call.
func Call(ctx context.Context, h Handler, sc Context) (out json.RawMessage, err error) {
	if isNil(h) {
		return nil, wrapf(ErrNilHandler, "steps: step %q: %s", sc.Step, unprefixed(ErrNilHandler))
	}
	sc = sc.withDefaults()
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	out, err = h.Handle(ctx, sc)
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		if jerr := jsoncheck.Check(out); jerr != nil {
			return nil, Permanent(fmt.Errorf("steps: step %q: output is %w", sc.Step, jerr))
		}
	}
	return out, nil
}

// isNil reports whether h is nil or a nil HandlerFunc.
func isNil(h Handler) bool {
	if h == nil {
		return true
	}
	f, ok := h.(HandlerFunc)
	return ok && f == nil
}

// IsNil reports whether h is nil, including a nil [HandlerFunc] stored in
// the interface. Builders use it to reject missing handlers early.
func IsNil(h Handler) bool { return isNil(h) }
