package api

import (
	"context"
	"net/http"
	"sort"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
)

// listQueues shows the depth of every queue that a workflow's version
// or a live node uses: GET /v1/queues. A queue's oldest ready task is the
// one it hands out next; its age is how long its step has been ready
// (toQueue).
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

// toQueue is a queue's depth as the API shows it. The age of its next
// ready task is how long that task's step has been ready.
func (s *server) toQueue(d engine.QueueDepth) client.Queue {
	q := client.Queue{Name: d.Name, Ready: d.Ready, Delayed: d.Delayed, Leased: d.Leased, Paused: d.Paused, OldestReadyTask: d.NextTask}
	if !d.ReadySince.IsZero() {
		if age := s.o.Now().Sub(d.ReadySince); age > 0 {
			q.OldestReadyAgeSeconds = age.Seconds()
		}
	}
	return q
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
	d, err := s.e.QueueDepth(r.Context(), name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.toQueue(d))
}
