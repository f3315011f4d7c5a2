package clocktest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/clocktest"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clocktest.New(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now() = %v, want %v", got, t0)
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), t0.Add(90*time.Second); !got.Equal(want) {
		t.Errorf("after Advance: Now() = %v, want %v", got, want)
	}
	c.Set(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Errorf("after Set: Now() = %v, want %v", got, t0)
	}
	var zero clocktest.Clock
	if !zero.Now().IsZero() {
		t.Errorf("zero Clock reads %v", zero.Now())
	}
}

func TestClockIsSafeForConcurrentUse(t *testing.T) {
	c := clocktest.New(time.Unix(0, 0))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got, want := c.Now(), time.Unix(8, 0); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
}
