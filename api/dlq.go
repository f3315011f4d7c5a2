package api

import (
	"net/http"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/persistence"
)

// listDeadLetters lists dead steps, newest first: GET /v1/dead-letters.
func (s *server) listDeadLetters(w http.ResponseWriter, r *http.Request) error {
	q, err := queryValues(r, "workflow", "cursor", "limit")
	if err != nil {
		return err
	}
	var p persistence.StepListDeadParams
	if p.Workflow, err = nameParam(q, "workflow"); err != nil {
		return err
	}
	if p.Cursor, err = single(q, "cursor"); err != nil {
		return err
	}
	if p.Limit, err = limitParam(q); err != nil {
		return err
	}
	page, err := s.e.DeadLetters(r.Context(), p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, client.DeadLetterList{DeadLetters: toSteps(page.Steps), NextCursor: page.NextCursor})
}

// deadLetterRef returns the {run} and {step} of a dead-letter route, after
// checking that the step exists (404 otherwise).
func (s *server) deadLetterRef(r *http.Request) (string, string, error) {
	id, err := s.runID(r, "run")
	if err != nil {
		return "", "", err
	}
	step, err := stepName(r)
	if err != nil {
		return "", "", err
	}
	if _, err := s.e.GetRun(r.Context(), id); err != nil {
		return "", "", withRun(err, id)
	}
	if _, err := s.e.GetStep(r.Context(), id, step); err != nil {
		return "", "", withRun(err, id)
	}
	return id, step, nil
}

// retryDeadLetter retries a dead step, resuming its run: POST
// /v1/dead-letters/{run}/{step}/retry.
func (s *server) retryDeadLetter(w http.ResponseWriter, r *http.Request) error {
	id, step, err := s.deadLetterRef(r)
	if err != nil {
		return err
	}
	if err := s.e.RetryDead(r.Context(), id, step, actor(r)); err != nil {
		return withRun(err, id)
	}
	st, err := s.e.GetStep(r.Context(), id, step)
	if err != nil {
		return withRun(err, id)
	}
	return writeJSON(w, http.StatusOK, toStep(st))
}

// discardDeadLetter removes a dead step from the dead letters (it becomes
// cancelled): DELETE /v1/dead-letters/{run}/{step}.
func (s *server) discardDeadLetter(w http.ResponseWriter, r *http.Request) error {
	id, step, err := s.deadLetterRef(r)
	if err != nil {
		return err
	}
	if err := s.e.DiscardDead(r.Context(), id, step); err != nil {
		return withRun(err, id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
