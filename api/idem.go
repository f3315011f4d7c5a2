package api

import (
	"net/http"
	"net/url"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/clip"
)

// setIdempotencyFilter sets the runs listing's idempotency key filter.
func setIdempotencyFilter(f *engine.RunFilter, q url.Values) error {
	key, err := single(q, "idempotency_key")
	if err != nil {
		return err
	}
	if len(key) > maxIdempotencyKey {
		return problemf(http.StatusBadRequest, CodeInvalidParameter, "idempotency_key %q is %d bytes, over the limit of %d", clip.String(key), len(key), maxIdempotencyKey)
	}
	f.IdempotencyKey = key
	return nil
}
