package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dagflow/dagflow/internal/clip"
)

// Reserved idempotency keys. The runs dagflow starts itself have keys of
// their own: a child run's (ChildRunKey), an event's (EventRunKey) and a
// schedule tick's (cron.Key, and the manual "schedule:<name>:manual:<ns>").
// No caller may use a key in those namespaces, or a caller's run could
// take the place of dagflow's: a run keyed like a future tick would make
// that tick return the caller's run, and its scheduled input never run.
// Trigger and TriggerTx refuse them (CheckIdempotencyKey); the engine's
// own runs pass an unexported option (internalRun) that allows exactly
// their namespace.

// reserved lists the reserved prefixes and whose runs they key.
var reserved = []struct{ prefix, owner string }{
	{childKeyPrefix, "child runs"},
	{eventKeyPrefix, "event runs"},
	{scheduleKeyPrefix, "schedule ticks"},
}

const (
	eventKeyPrefix    = "event:"
	scheduleKeyPrefix = "schedule:"
)

// ReservedKeyPrefixes returns the idempotency-key prefixes of the runs
// dagflow starts itself: "child:" (ChildRunKey), "event:" (EventRunKey)
// and "schedule:" (a schedule's ticks). Keys are compared byte for byte,
// so the prefixes are too.
func ReservedKeyPrefixes() []string {
	out := make([]string, len(reserved))
	for i, r := range reserved {
		out[i] = r.prefix
	}
	return out
}

// ErrInvalidKey is returned for an idempotency key that is not empty (no
// key) but only whitespace.
var ErrInvalidKey = errors.New("engine: invalid idempotency key")

// ReservedKeyError is the error for an idempotency key in a reserved
// namespace. It wraps ErrReservedKey; its message names the prefix the
// key starts with and lists them all:
//
//	engine: idempotency key "child:x" starts with "child:", which is reserved for child runs (reserved prefixes: "child:", "event:", "schedule:")
type ReservedKeyError struct {
	Key    string
	Prefix string // the reserved prefix Key starts with
	Owner  string // whose runs the prefix keys: "child runs", ...
}

func (e *ReservedKeyError) Error() string {
	quoted := make([]string, len(reserved))
	for i, r := range reserved {
		quoted[i] = fmt.Sprintf("%q", r.prefix)
	}
	return fmt.Sprintf("engine: idempotency key %q starts with %q, which is reserved for %s (reserved prefixes: %s)",
		clip.String(e.Key), e.Prefix, e.Owner, strings.Join(quoted, ", "))
}

// Unwrap returns ErrReservedKey.
func (e *ReservedKeyError) Unwrap() error { return ErrReservedKey }

// CheckIdempotencyKey reports whether a caller may start a run with key:
// nil for no key (empty) or a key of its own; an error wrapping
// ErrInvalidKey for a key of only whitespace; a *ReservedKeyError for a
// key starting with one of ReservedKeyPrefixes. Trigger and TriggerTx
// check every key with it; an API or a command line may check a key with
// it before it calls them. Other keys are taken as they are, byte for
// byte (" a" and "a" are two keys).
func CheckIdempotencyKey(key string) error {
	if key == "" {
		return nil
	}
	if strings.TrimSpace(key) == "" {
		return fmt.Errorf("%w: %q is only whitespace (give a key with other characters, or none)", ErrInvalidKey, clip.String(key))
	}
	for _, r := range reserved {
		if strings.HasPrefix(key, r.prefix) {
			return &ReservedKeyError{Key: key, Prefix: r.prefix, Owner: r.owner}
		}
	}
	return nil
}

// internalRun lets one of the engine's own runs take a key in the
// reserved namespace prefix, and only there. It is unexported, so no
// caller can pass it.
func internalRun(prefix string) TriggerOption {
	return func(o *triggerOptions) { o.internal = prefix }
}

// checkKey checks the run's key: a caller's by CheckIdempotencyKey, one
// of the engine's own runs against its namespace.
func (o *triggerOptions) checkKey() error {
	if o.internal == "" {
		return CheckIdempotencyKey(o.key)
	}
	if !strings.HasPrefix(o.key, o.internal) {
		return fmt.Errorf("engine: the key %q of an internal run is not in its namespace %q", clip.String(o.key), o.internal)
	}
	return nil
}
