package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/internal/clip"
	"github.com/dagflow/dagflow/persistence"
)

func toAPIKey(k persistence.APIKey) client.APIKey {
	return client.APIKey{ID: k.ID, Name: k.Name, Scope: k.Scope, Hint: k.Hint, CreatedAt: k.CreatedAt.UTC(), RevokedAt: utcPtr(k.RevokedAt)}
}

// listKeys lists every API key, revoked ones too: GET /v1/api-keys.
func (s *server) listKeys(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryValues(r); err != nil {
		return err
	}
	list, err := ListKeys(r.Context(), s.o.Keys)
	if err != nil {
		return err
	}
	out := client.APIKeyList{Keys: make([]client.APIKey, len(list))}
	for i, k := range list {
		out.Keys[i] = toAPIKey(k)
	}
	return writeJSON(w, http.StatusOK, out)
}

// createKey makes a key and answers its secret, once: POST /v1/api-keys.
func (s *server) createKey(w http.ResponseWriter, r *http.Request) error {
	var req client.CreateAPIKeyRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := ValidateKeyName(req.Name); err != nil {
		return problemf(http.StatusBadRequest, CodeInvalidName, "%v", err)
	}
	if !Scope(req.Scope).Valid() {
		return problemf(http.StatusBadRequest, CodeInvalidParameter, "scope %q is not read, operate or admin", clip.String(req.Scope))
	}
	secret, k, err := CreateKey(r.Context(), s.o.Keys, req.Name, req.Scope, s.o.Now())
	if errors.Is(err, persistence.ErrAPIKeyExists) {
		return problemf(http.StatusConflict, CodeConflict, "an API key named %q exists; revoke it first", req.Name)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, client.CreatedAPIKey{APIKey: toAPIKey(k), Secret: secret})
}

// revokeKey revokes a key by id, name or secret: DELETE
// /v1/api-keys/{key}. A secret is never repeated in an answer or a log.
func (s *server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	ref := r.PathValue("key")
	secret := strings.HasPrefix(ref, secretPrefix)
	if _, err := uuid.Parse(ref); err != nil && !secret {
		if err := ValidateKeyName(ref); err != nil {
			return problemf(http.StatusBadRequest, CodeInvalidName, "%v", err)
		}
	}
	k, err := RevokeKey(r.Context(), s.o.Keys, ref, s.o.Now())
	switch {
	case errors.Is(err, ErrMalformedSecret):
		return problemf(http.StatusBadRequest, CodeInvalidName, "the key given starts with %q but is not a key's secret (%q and 43 base64url characters); it is not repeated here", secretPrefix, secretPrefix)
	case errors.Is(err, persistence.ErrAPIKeyNotFound) && secret:
		return problemf(http.StatusNotFound, CodeNotFound, "no API key has the secret given (it is not repeated here)")
	case errors.Is(err, persistence.ErrAPIKeyNotFound):
		return problemf(http.StatusNotFound, CodeNotFound, "no API key with id or name %q", clip.String(ref))
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toAPIKey(k))
}
