-- Isolation between workloads: reconcile by workflow, a store identity,
-- a node registry (see the MySQL migration 00007 for why).

-- +goose Up
CREATE INDEX idx_steps_wf_due ON step_runs (status, workflow, due_at, run_id, step);
CREATE INDEX idx_steps_dead ON step_runs (dead_at, run_id, step);
DROP INDEX idx_steps_due;
CREATE INDEX idx_runs_wf_start_due ON workflow_runs (workflow, start_due, id);

CREATE TABLE dagflow_meta (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
INSERT INTO dagflow_meta (name, value) VALUES ('store_id', lower(hex(randomblob(16))));

CREATE TABLE dagflow_nodes (
    id           TEXT NOT NULL PRIMARY KEY,
    started_at   TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    info         BLOB
) STRICT;
CREATE INDEX idx_nodes_heartbeat ON dagflow_nodes (heartbeat_at, id);

-- +goose Down
DROP TABLE dagflow_nodes;
DROP TABLE dagflow_meta;
DROP INDEX idx_runs_wf_start_due;
CREATE INDEX idx_steps_due ON step_runs (status, due_at, run_id, step);
DROP INDEX idx_steps_dead;
DROP INDEX idx_steps_wf_due;
