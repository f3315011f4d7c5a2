package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// taskRef is what a queue task id says: which step of which run, forward or
// compensation, and the attempt it was enqueued for. Task ids look like
// "<run id>/<step>/<attempt>" and "<run id>/<step>/c<attempt>"; the attempt
// makes a retry a new task while repeats of one attempt dedupe in Redis.
type taskRef struct {
	RunID        string
	Step         string
	Compensation bool
	Attempt      int
}

func (r taskRef) String() string {
	if r.Compensation {
		return fmt.Sprintf("%s/%s/c%d", r.RunID, r.Step, r.Attempt)
	}
	return fmt.Sprintf("%s/%s/%d", r.RunID, r.Step, r.Attempt)
}

func parseTaskID(id string) (taskRef, error) {
	last := strings.LastIndexByte(id, '/')
	if last <= 0 {
		return taskRef{}, fmt.Errorf("engine: malformed task id %q", id)
	}
	mid := strings.LastIndexByte(id[:last], '/')
	if mid <= 0 || mid+1 == last {
		return taskRef{}, fmt.Errorf("engine: malformed task id %q", id)
	}
	r := taskRef{RunID: id[:mid], Step: id[mid+1 : last]}
	a := id[last+1:]
	if strings.HasPrefix(a, "c") {
		r.Compensation = true
		a = a[1:]
	}
	n, err := strconv.Atoi(a)
	if err != nil || n < 1 {
		return taskRef{}, fmt.Errorf("engine: malformed task id %q: bad attempt", id)
	}
	r.Attempt = n
	return r, nil
}
