package persistence

// TEMPORARY (issue #22): the records and sentinels of the contract that
// the store branch adds to records.go and errors.go. The integrator
// deletes this file when that branch is merged.

import (
	"errors"
	"time"
)

// APIKey is an HTTP API key as stored: never the secret, only its SHA-256.
type APIKey struct {
	ID        string
	Name      string
	Scope     string
	Hash      []byte
	Hint      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// APIKeyRevokeParams are the arguments of APIKeyRevoke.
type APIKeyRevokeParams struct {
	ID, Name string
	Now      time.Time
}

// Sentinels of the API key methods.
var (
	ErrAPIKeyNotFound = errors.New("persistence: api key not found")
	ErrAPIKeyExists   = errors.New("persistence: api key name already used")
)
