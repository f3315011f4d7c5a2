-- Workflow definitions, API keys, and what a run started with.
--
-- workflow_definitions holds each version of each workflow's plan (never
-- code), named by its content hash; a node upserts the versions it
-- registers. Versions pile up with deploys, so nothing reads them all:
-- one workflow's versions are a range of idx_definitions_registered
-- (workflow, registered_at, version), newest registration last, and the
-- current version of every workflow is a range of uq_definitions_current.
-- current_of is the workflow's name on its current version (latest
-- registration, ties by the greater version) and NULL on the others; the
-- store moves it in the transaction that registers a version, and the
-- unique index allows one current version per workflow (and any number
-- of NULLs) on every database, without generated columns.
--
-- api_keys holds the HTTP API's keys: the SHA-256 of the secret, never
-- the secret. A name is unique among the keys that are not revoked, by
-- the same trick: active_name is the name until the key is revoked, then
-- NULL.
--
-- A run records the definition version it started with (empty for the
-- runs before this migration), and runs are listed by idempotency key
-- across workflows through idx_runs_idempotency_created.
--
-- Each index change is its own statement, and a column and its index are
-- added apart (MySQL 8, MariaDB and TiDB alike).

-- +goose Up
CREATE TABLE workflow_definitions (
    workflow      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    declared      INT NOT NULL,
    spec          MEDIUMBLOB NOT NULL,
    current_of    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    created_at    DATETIME(6) NOT NULL,
    registered_at DATETIME(6) NOT NULL,
    PRIMARY KEY (workflow, version),
    KEY idx_definitions_registered (workflow, registered_at, version),
    UNIQUE KEY uq_definitions_current (current_of)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE api_keys (
    id          VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name        VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    active_name VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NULL,
    scope       VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    hash        BINARY(32) NOT NULL,
    hint        VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    created_at  DATETIME(6) NOT NULL,
    revoked_at  DATETIME(6) NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_api_keys_hash (hash),
    UNIQUE KEY uq_api_keys_active_name (active_name),
    KEY idx_api_keys_name (name, revoked_at, id),
    KEY idx_api_keys_created (created_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE workflow_runs ADD COLUMN definition VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '';
ALTER TABLE workflow_runs ADD INDEX idx_runs_idempotency_created (idempotency_key, created_at, id);

-- +goose Down
ALTER TABLE workflow_runs DROP INDEX idx_runs_idempotency_created;
ALTER TABLE workflow_runs DROP COLUMN definition;
DROP TABLE api_keys;
DROP TABLE workflow_definitions;
