package steps

import (
	"errors"
	"regexp"
	"slices"
	"sync"
)

// Registry errors, wrapped by [Registry.Register].
var (
	ErrDuplicateHandler   = errors.New("steps: handler already registered")
	ErrInvalidHandlerName = errors.New("steps: invalid handler name")
)

// handlerName allows dotted names ("order.reserve") so that handlers can be
// grouped by domain; the name is only a lookup key, never a storage key.
var handlerName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,127}$`)

// Registry maps names to handlers so that workflows declared in YAML can
// refer to Go code. It is safe for concurrent use. The zero value is not
// usable; call [NewRegistry].
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{handlers: make(map[string]Handler)}
}

// Register adds h under name. Names start with a letter followed by up to
// 127 letters, digits, '_', '-' or '.'. A nil handler, an invalid name or a
// name already taken is an error.
func (r *Registry) Register(name string, h Handler) error {
	if !handlerName.MatchString(name) {
		return wrapf(ErrInvalidHandlerName, "steps: register %q: %s (want a letter followed by up to 127 letters, digits, '_', '-' or '.')", name, unprefixed(ErrInvalidHandlerName))
	}
	if isNil(h) {
		return wrapf(ErrNilHandler, "steps: register %q: %s", name, unprefixed(ErrNilHandler))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.handlers[name]; ok {
		return wrapf(ErrDuplicateHandler, "steps: register %q: %s", name, unprefixed(ErrDuplicateHandler))
	}
	r.handlers[name] = h
	return nil
}

// MustRegister is like [Registry.Register] but panics on error. It is meant
// for program start-up.
func (r *Registry) MustRegister(name string, h Handler) {
	if err := r.Register(name, h); err != nil {
		panic(err)
	}
}

// Lookup returns the handler registered under name.
func (r *Registry) Lookup(name string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.handlers[name]
	return h, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	names := make([]string, 0, len(r.handlers))
	for n := range r.handlers {
		names = append(names, n)
	}
	r.mu.RUnlock()
	slices.Sort(names)
	return names
}
