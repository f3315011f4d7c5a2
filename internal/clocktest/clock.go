package clocktest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to. It is safe for
// concurrent use; the zero value reads the zero time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock set to t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}
