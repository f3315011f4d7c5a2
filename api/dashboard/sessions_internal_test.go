package dashboard

import (
	"testing"
	"time"
)

// TestSessionsPerKeyCapped: one key logging in again and again replaces
// its own oldest sessions, not other keys' ones.
func TestSessionsPerKeyCapped(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ss := newSessions(time.Hour, func() time.Time { now = now.Add(time.Millisecond); return now })
	other := ss.create("other-secret", false, "other", ScopeRead)
	var first *session
	for i := range maxSessions + 10 {
		s := ss.create("busy-secret", false, "busy", ScopeRead)
		if i == 0 {
			first = s
		}
	}
	if ss.get(other.id) == nil {
		t.Fatal("another key's session was evicted by one key's logins")
	}
	if ss.get(first.id) != nil {
		t.Error("the busy key's oldest session survived past the cap")
	}
	n := 0
	ss.mu.Lock()
	for _, s := range ss.m {
		if s.secret == "busy-secret" {
			n++
		}
	}
	ss.mu.Unlock()
	if n != maxSessionsPerKey {
		t.Errorf("the busy key holds %d sessions, want %d", n, maxSessionsPerKey)
	}
}
