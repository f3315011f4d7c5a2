-- Workflow definitions, API keys, and what a run started with (see the
-- MySQL migration 00008 for why): current_of and active_name are the
-- workflow's name on its current version and a key's name until it is
-- revoked, NULL otherwise, under unique indexes.

-- +goose Up
CREATE TABLE workflow_definitions (
    workflow      TEXT NOT NULL,
    version       TEXT NOT NULL,
    declared      INTEGER NOT NULL,
    spec          BLOB NOT NULL,
    current_of    TEXT,
    created_at    TEXT NOT NULL,
    registered_at TEXT NOT NULL,
    PRIMARY KEY (workflow, version)
) STRICT;
CREATE INDEX idx_definitions_registered ON workflow_definitions (workflow, registered_at, version);
CREATE UNIQUE INDEX uq_definitions_current ON workflow_definitions (current_of);

CREATE TABLE api_keys (
    id          TEXT NOT NULL PRIMARY KEY,
    name        TEXT NOT NULL,
    active_name TEXT,
    scope       TEXT NOT NULL,
    hash        BLOB NOT NULL,
    hint        TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
) STRICT;
CREATE UNIQUE INDEX uq_api_keys_hash ON api_keys (hash);
CREATE UNIQUE INDEX uq_api_keys_active_name ON api_keys (active_name);
CREATE INDEX idx_api_keys_name ON api_keys (name, revoked_at, id);
CREATE INDEX idx_api_keys_created ON api_keys (created_at, id);

ALTER TABLE workflow_runs ADD COLUMN definition TEXT NOT NULL DEFAULT '';
CREATE INDEX idx_runs_idempotency_created ON workflow_runs (idempotency_key, created_at, id);

-- +goose Down
DROP INDEX idx_runs_idempotency_created;
ALTER TABLE workflow_runs DROP COLUMN definition;
DROP TABLE api_keys;
DROP TABLE workflow_definitions;
