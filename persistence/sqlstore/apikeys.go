package sqlstore

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/dagflow/dagflow/persistence"
)

// API keys (MySQL migration 00008, SQLite 00007). A key's name is unique
// among the keys that are not revoked: active_name is the name until the
// key is revoked, then NULL, under a unique index, so that two concurrent
// creations of one name cannot both succeed on any database.

const apiKeyCols = "id, name, scope, hash, hint, created_at, revoked_at"

type apiKeyRow struct {
	ID        string   `db:"id"`
	Name      string   `db:"name"`
	Scope     string   `db:"scope"`
	Hash      []byte   `db:"hash"`
	Hint      string   `db:"hint"`
	CreatedAt dbTime   `db:"created_at"`
	RevokedAt nullTime `db:"revoked_at"`
}

func (r apiKeyRow) record() persistence.APIKey {
	return persistence.APIKey{
		ID:        r.ID,
		Name:      r.Name,
		Scope:     r.Scope,
		Hash:      r.Hash,
		Hint:      r.Hint,
		CreatedAt: r.CreatedAt.T,
		RevokedAt: r.RevokedAt.ptr(),
	}
}

// validAPIKey checks a key to create.
func validAPIKey(k persistence.APIKey) error {
	if !isID(k.ID) {
		return invalid("api key id", k.ID, "must be 1-64 characters of [A-Za-z0-9_.:-] starting with a letter or digit")
	}
	if !isAPIKeyName(k.Name) {
		return invalid("api key name", k.Name, "must be 1-100 characters of [A-Za-z0-9._-]")
	}
	switch k.Scope {
	case persistence.ScopeRead, persistence.ScopeOperate, persistence.ScopeAdmin:
	default:
		return invalid(fmt.Sprintf("api key %q scope", k.Name), k.Scope, "must be read, operate or admin")
	}
	if len(k.Hash) != APIKeyHashLen {
		return invalid(fmt.Sprintf("api key %q hash", k.Name), hex.EncodeToString(k.Hash),
			fmt.Sprintf("is %d bytes, want %d (a SHA-256)", len(k.Hash), APIKeyHashLen))
	}
	if len(k.Hint) > MaxAPIKeyHintLen {
		return invalid(fmt.Sprintf("api key %q hint", k.Name), k.Hint, fmt.Sprintf("longer than %d characters", MaxAPIKeyHintLen))
	}
	for i := 0; i < len(k.Hint); i++ {
		if c := k.Hint[i]; c < 0x20 || c > 0x7e {
			return invalid(fmt.Sprintf("api key %q hint", k.Name), k.Hint, "must be printable ASCII")
		}
	}
	if k.CreatedAt.IsZero() {
		return invalid(fmt.Sprintf("api key %q creation time", k.Name), "", "is zero")
	}
	if k.RevokedAt != nil {
		return invalid(fmt.Sprintf("api key %q revocation time", k.Name), k.RevokedAt.String(), "a new key cannot be revoked")
	}
	return nil
}

// The statements of the API keys, each served by an index (the tests
// EXPLAIN them through APIKeyQueries).
const (
	// apiKeyByHashSQL: uq_api_keys_hash.
	apiKeyByHashSQL = `SELECT ` + apiKeyCols + ` FROM api_keys WHERE hash = ?`
	// apiKeyByIDSQL: the primary key.
	apiKeyByIDSQL = `SELECT ` + apiKeyCols + ` FROM api_keys WHERE id = ?`
	// apiKeyActiveSQL reads the valid key of a name: uq_api_keys_active_name.
	apiKeyActiveSQL = `SELECT ` + apiKeyCols + ` FROM api_keys WHERE active_name = ?`
	// What refused a key's creation: a valid key of its name, its hash or
	// its id (each unique).
	apiKeyNameTakenSQL = `SELECT 1 FROM api_keys WHERE active_name = ?`
	apiKeyHashTakenSQL = `SELECT 1 FROM api_keys WHERE hash = ?`
	apiKeyIDTakenSQL   = `SELECT 1 FROM api_keys WHERE id = ?`
)

// apiKeyListSQL reads every key in creation order: idx_api_keys_created
// (created_at, id), from end to end. Keys are few (people make them), and
// a listing of every key reads them all.
func (s *Store) apiKeyListSQL() string {
	return `SELECT ` + apiKeyCols + ` FROM api_keys` + s.d.useIndex("idx_api_keys_created") + ` ORDER BY created_at, id`
}

// apiKeyLastRevokedSQL reads the key of a name revoked last: the end of
// the name's range of idx_api_keys_name (name, revoked_at, id).
func (s *Store) apiKeyLastRevokedSQL() string {
	return `SELECT ` + apiKeyCols + ` FROM api_keys` + s.d.useIndex("idx_api_keys_name") +
		` WHERE name = ? ORDER BY revoked_at DESC, id DESC LIMIT 1`
}

// APIKeyCreate implements persistence.Store: one INSERT, whose unique
// indexes refuse a name held by a valid key, a hash or an id already
// stored; the refusal then says which.
func (s *Store) APIKeyCreate(ctx context.Context, k persistence.APIKey) (persistence.APIKey, error) {
	if err := validAPIKey(k); err != nil {
		return persistence.APIKey{}, err
	}
	k.CreatedAt = norm(k.CreatedAt)
	k.Hash = append([]byte(nil), k.Hash...)
	err := s.write(ctx, func(q querier) error {
		_, err := s.exec(ctx, q, `INSERT INTO api_keys (id, name, active_name, scope, hash, hint, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, k.ID, k.Name, k.Name, k.Scope, k.Hash, k.Hint, s.t(k.CreatedAt))
		if err == nil || !s.d.IsDuplicate(err) {
			return err
		}
		for _, c := range []struct {
			query string
			arg   any
			err   error
		}{
			{apiKeyNameTakenSQL, k.Name, fmt.Errorf("%w: %q", persistence.ErrAPIKeyExists, k.Name)},
			{apiKeyHashTakenSQL, k.Hash, invalid(fmt.Sprintf("api key %q hash", k.Name), hex.EncodeToString(k.Hash), "already used by another key")},
			{apiKeyIDTakenSQL, k.ID, invalid("api key id", k.ID, "already used by another key")},
		} {
			ok, qerr := s.exists(ctx, q, c.query, c.arg)
			if qerr != nil {
				return qerr
			}
			if ok {
				return c.err
			}
		}
		return err
	})
	if err != nil {
		return persistence.APIKey{}, wrap("api key create", err)
	}
	return k, nil
}

// APIKeyByHash implements persistence.Store.
func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (persistence.APIKey, error) {
	if len(hash) != APIKeyHashLen {
		return persistence.APIKey{}, fmt.Errorf("%w: a hash of %d bytes (want %d)", persistence.ErrAPIKeyNotFound, len(hash), APIKeyHashLen)
	}
	var rows []apiKeyRow
	if err := s.selectAll(ctx, s.db, &rows, apiKeyByHashSQL, hash); err != nil {
		return persistence.APIKey{}, wrap("api key by hash", err)
	}
	if len(rows) == 0 {
		return persistence.APIKey{}, fmt.Errorf("%w: no key has this hash", persistence.ErrAPIKeyNotFound)
	}
	return rows[0].record(), nil
}

// APIKeyList implements persistence.Store.
func (s *Store) APIKeyList(ctx context.Context) ([]persistence.APIKey, error) {
	var rows []apiKeyRow
	if err := s.selectAll(ctx, s.db, &rows, s.apiKeyListSQL()); err != nil {
		return nil, wrap("api key list", err)
	}
	out := make([]persistence.APIKey, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// APIKeyRevoke implements persistence.Store. By name it revokes the
// name's valid key; when the name has none, it returns the name's key
// revoked last, as it is.
func (s *Store) APIKeyRevoke(ctx context.Context, p persistence.APIKeyRevokeParams) (persistence.APIKey, error) {
	switch {
	case (p.ID == "") == (p.Name == ""):
		return persistence.APIKey{}, invalid("api key to revoke", fmt.Sprintf("id %q name %q", p.ID, p.Name), "name exactly one of id and name")
	case p.ID != "" && !isID(p.ID):
		return persistence.APIKey{}, fmt.Errorf("%w: id %q", persistence.ErrAPIKeyNotFound, p.ID)
	case p.Name != "" && !isAPIKeyName(p.Name):
		return persistence.APIKey{}, fmt.Errorf("%w: name %q", persistence.ErrAPIKeyNotFound, p.Name)
	}
	now := norm(p.Now)
	var out persistence.APIKey
	err := s.write(ctx, func(q querier) error {
		var rows []apiKeyRow
		query, arg := apiKeyByIDSQL+s.d.ForUpdate, p.ID
		if p.Name != "" {
			query, arg = apiKeyActiveSQL+s.d.ForUpdate, p.Name
		}
		if err := s.selectAll(ctx, q, &rows, query, arg); err != nil {
			return err
		}
		if len(rows) == 0 && p.Name != "" {
			if err := s.selectAll(ctx, q, &rows, s.apiKeyLastRevokedSQL(), p.Name); err != nil {
				return err
			}
		}
		if len(rows) == 0 {
			if p.Name != "" {
				return fmt.Errorf("%w: name %q", persistence.ErrAPIKeyNotFound, p.Name)
			}
			return fmt.Errorf("%w: id %q", persistence.ErrAPIKeyNotFound, p.ID)
		}
		out = rows[0].record()
		if out.RevokedAt != nil {
			return nil
		}
		if _, err := s.exec(ctx, q, `UPDATE api_keys SET revoked_at = ?, active_name = NULL WHERE id = ?`, s.t(now), out.ID); err != nil {
			return err
		}
		out.RevokedAt = &now
		return nil
	})
	if err != nil {
		return persistence.APIKey{}, wrap("api key revoke", err)
	}
	return out, nil
}

// APIKeyQueries returns the API keys' reads, for tests to EXPLAIN:
// APIKeyByHash, APIKeyList, the reads of APIKeyRevoke (by id, by name,
// the name's key revoked last) and those with which APIKeyCreate tells a
// refusal apart.
func (s *Store) APIKeyQueries() []Query {
	hash := make([]byte, APIKeyHashLen)
	return []Query{
		{Name: "APIKeyByHash", SQL: apiKeyByHashSQL, Args: []any{hash}},
		{Name: "APIKeyList", SQL: s.apiKeyListSQL()},
		{Name: "APIKeyRevoke/id", SQL: apiKeyByIDSQL + s.d.ForUpdate, Args: []any{"k1"}},
		{Name: "APIKeyRevoke/name", SQL: apiKeyActiveSQL + s.d.ForUpdate, Args: []any{"ci"}},
		{Name: "APIKeyRevoke/last-revoked", SQL: s.apiKeyLastRevokedSQL(), Args: []any{"ci"}},
		{Name: "APIKeyCreate/name-taken", SQL: apiKeyNameTakenSQL, Args: []any{"ci"}},
		{Name: "APIKeyCreate/hash-taken", SQL: apiKeyHashTakenSQL, Args: []any{hash}},
		{Name: "APIKeyCreate/id-taken", SQL: apiKeyIDTakenSQL, Args: []any{"k1"}},
	}
}
