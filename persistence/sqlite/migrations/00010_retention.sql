-- Retention: old finished runs deleted in batches, by one node at a time
-- (see the MySQL migration 00014). The sweep pages on (finished_at, id);
-- dagflow_leases holds named leases one node at a time holds.

-- +goose Up
CREATE INDEX idx_runs_finished_id ON workflow_runs (finished_at, id);
DROP INDEX idx_runs_finished;

CREATE TABLE dagflow_leases (
    name       TEXT NOT NULL PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE dagflow_leases;
CREATE INDEX idx_runs_finished ON workflow_runs (finished_at);
DROP INDEX idx_runs_finished_id;
