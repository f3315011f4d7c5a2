package persistence

import "context"

// APIKeys is the part of a Store that keeps the API keys: what the HTTP
// API's authentication reads and the key commands change.
type APIKeys interface {
	// APIKeyCreate stores a new key; a name already used by a key that is
	// not revoked gives ErrAPIKeyExists.
	APIKeyCreate(ctx context.Context, k APIKey) (APIKey, error)
	// APIKeyByHash returns the key with this hash (revoked keys too: the
	// caller checks RevokedAt), or ErrAPIKeyNotFound.
	APIKeyByHash(ctx context.Context, hash []byte) (APIKey, error)
	// APIKeyList lists every key (revoked too), oldest first.
	APIKeyList(ctx context.Context) ([]APIKey, error)
	// APIKeyRevoke revokes the key named by p.ID or p.Name (exactly one
	// set) if not revoked yet, returning it; unknown gives
	// ErrAPIKeyNotFound. A key already revoked is returned as it is; by
	// name, that is the last key of that name revoked, when no key of the
	// name is valid.
	APIKeyRevoke(ctx context.Context, p APIKeyRevokeParams) (APIKey, error)
}
