package testenv

import (
	"sync"
	"testing"
)

// Running may be asked from one goroutine while another kills or
// restarts the server (KillMaster from a fault-injection goroutine); run
// with -race.
func TestRedisServerRunningWhileKilled(t *testing.T) {
	s := StartRedis(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				s.Running()
			}
		}
	}()
	s.Kill()
	if s.Running() {
		t.Error("Running after Kill")
	}
	s.Start()
	if !s.Running() {
		t.Error("not Running after Start")
	}
	close(stop)
	wg.Wait()
}
