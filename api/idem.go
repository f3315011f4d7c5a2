package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// setIdempotencyFilter sets the runs listing's idempotency key filter.
func setIdempotencyFilter(f *engine.RunFilter, q url.Values) error {
	key, err := single(q, "idempotency_key")
	if err != nil {
		return err
	}
	if len(key) > maxIdempotencyKey {
		return problemf(http.StatusBadRequest, CodeInvalidParameter, "idempotency_key %q is %d bytes, over the limit of %d", truncate(key), len(key), maxIdempotencyKey)
	}
	f.IdempotencyKey = key
	return nil
}

// runWithKey reports whether a run of workflow has the idempotency key
// (an index seek; payloads are not read).
func (s *server) runWithKey(ctx context.Context, workflow, key string) (bool, error) {
	page, err := s.e.Store().RunList(ctx, persistence.RunListParams{Workflow: workflow, IdempotencyKey: key, Limit: 1})
	if err != nil {
		return false, err
	}
	return len(page.Runs) > 0, nil
}
