package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dagflow/dagflow/engine"
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
	// TEMPORARY until RunFilter.IdempotencyKey lands: filtered in runWithKey only.
	_ = key
	return nil
}

// runWithKey reports whether a run of workflow has the idempotency key.
func (s *server) runWithKey(ctx context.Context, workflow, key string) (bool, error) {
	// TEMPORARY until RunFilter.IdempotencyKey lands: a scan.
	f := engine.RunFilter{Workflow: workflow, Limit: 1000}
	for {
		page, err := s.e.Runs(ctx, f)
		if err != nil {
			return false, err
		}
		for _, r := range page.Runs {
			if r.IdempotencyKey == key {
				return true, nil
			}
		}
		if page.NextCursor == "" {
			return false, nil
		}
		f.Cursor = page.NextCursor
	}
}
