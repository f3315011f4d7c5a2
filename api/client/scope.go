package client

// Scope is what an API key (and a dashboard session signed in with one)
// may do. Each scope includes the ones before it: read < operate < admin.
// The api and dashboard packages name this type; it is defined once,
// here, so the two authorise alike.
type Scope string

// The scopes of API keys.
const (
	// ScopeRead may read: workflows, runs, dead letters, schedules, queues.
	ScopeRead Scope = "read"
	// ScopeOperate may also trigger, cancel and retry runs, and retry or
	// discard dead letters.
	ScopeOperate Scope = "operate"
	// ScopeAdmin may also pause, resume and trigger schedules, and
	// create, list and revoke API keys.
	ScopeAdmin Scope = "admin"
)

// rank orders the scopes; 0 is not a scope.
func (s Scope) rank() int {
	switch s {
	case ScopeRead:
		return 1
	case ScopeOperate:
		return 2
	case ScopeAdmin:
		return 3
	}
	return 0
}

// Valid reports whether s is one of the scopes.
func (s Scope) Valid() bool { return s.rank() > 0 }

// Allows reports whether a key of scope s may do what needs need: s is
// a scope, and need is s or one before it.
func (s Scope) Allows(need Scope) bool { return s.rank() > 0 && s.rank() >= need.rank() }
