package api

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/queue"
)

// listQueues shows the depth of every queue that a workflow's version
// or a live node uses: GET /v1/queues. A queue's oldest ready task is the
// one it hands out next; its age is how long its step has been ready
// (oldestReady).
func (s *server) listQueues(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryValues(r); err != nil {
		return err
	}
	qs, err := s.queueList(r.Context())
	if err != nil {
		return err
	}
	out := client.QueueList{Queues: qs}
	return writeJSON(w, http.StatusOK, out)
}

// queueNames returns, by name, the default queue, every queue a step of
// a workflow registered here or of any stored version of a workflow uses,
// and every queue a live node's workers take steps from.
func (s *server) queueNames(ctx context.Context) ([]string, error) {
	set := map[string]bool{dag.DefaultQueueName: true}
	for _, wf := range s.e.Workflows() {
		if w := s.e.Workflow(wf); w != nil {
			for _, st := range w.Steps() {
				set[st.Queue] = true
			}
		}
	}
	if err := s.definitionQueues(ctx, set); err != nil {
		return nil, err
	}
	nodes, err := s.e.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		for _, q := range n.Queues {
			set[q] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// oldestReady sets the next ready task of the queue and how long it has
// been ready. Redis keeps no time for a ready task, so the age comes from
// the store: the task is "<run id>/<step>/<attempt>" (or "c<attempt>" for
// a compensation), and its step was made ready when it was queued, or
// when its retry came due, or when its run's delayed start came.
func (s *server) oldestReady(ctx context.Context, qi *client.Queue) error {
	tasks, err := s.e.Queue().List(ctx, qi.Name, queue.StateReady, 0, 1)
	if err != nil || len(tasks) == 0 {
		return err
	}
	qi.OldestReadyTask = tasks[0].ID
	runID, step, ok := splitTaskID(tasks[0].ID)
	if !ok {
		return nil
	}
	st, err := s.e.Store().StepGet(ctx, runID, step)
	if err != nil {
		// Acked or deleted since it was listed: the age is unknown.
		return nil
	}
	var since time.Time
	for _, t := range []*time.Time{st.QueuedAt, st.NextAttemptAt} {
		if t != nil && t.After(since) {
			since = *t
		}
	}
	if run, err := s.e.Store().RunGet(ctx, runID); err == nil && run.StartAt.After(since) {
		since = run.StartAt
	}
	if since.IsZero() {
		since = st.UpdatedAt
	}
	if age := s.o.Now().Sub(since); age > 0 {
		qi.OldestReadyAgeSeconds = age.Seconds()
	}
	return nil
}

// splitTaskID returns the run and step of a task id "<run id>/<step>/<n>"
// or "<run id>/<step>/c<n>" (the engine's task ids).
func splitTaskID(id string) (string, string, bool) {
	last := strings.LastIndexByte(id, '/')
	if last <= 0 {
		return "", "", false
	}
	mid := strings.LastIndexByte(id[:last], '/')
	if mid <= 0 || mid+1 == last {
		return "", "", false
	}
	if _, err := strconv.Atoi(strings.TrimPrefix(id[last+1:], "c")); err != nil {
		return "", "", false
	}
	return id[:mid], id[mid+1 : last], true
}

// pauseQueue stops every node from taking the queue's tasks: POST
// /v1/queues/{name}/pause.
func (s *server) pauseQueue(w http.ResponseWriter, r *http.Request) error {
	return s.setQueuePaused(w, r, true)
}

// resumeQueue undoes pauseQueue: POST /v1/queues/{name}/resume.
func (s *server) resumeQueue(w http.ResponseWriter, r *http.Request) error {
	return s.setQueuePaused(w, r, false)
}

func (s *server) setQueuePaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	name, err := queueName(r)
	if err != nil {
		return err
	}
	if paused {
		err = s.e.PauseQueue(r.Context(), name)
	} else {
		err = s.e.ResumeQueue(r.Context(), name)
	}
	if err != nil {
		return err
	}
	st, err := s.e.Queue().Stats(r.Context(), name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, client.Queue{Name: name, Ready: st.Ready, Delayed: st.Delayed, Leased: st.Leased, Paused: st.Paused})
}
