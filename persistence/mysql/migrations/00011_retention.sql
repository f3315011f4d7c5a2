-- Retention: old finished runs deleted in batches, by one node at a time.
--
-- The sweep reads finished runs oldest first and keeps those with a dead
-- step (the dead-letter queue is an operator's to empty), so it pages on
-- (finished_at, id) with a cursor rather than restarting at the oldest
-- finished run each batch: idx_runs_finished_id replaces
-- idx_runs_finished (same writes per run finish, one index either way).
--
-- dagflow_leases holds named leases that one node at a time holds for a
-- while (the retention sweep's is 'retention'): taken or extended by a
-- conditional write on one row, free once expires_at has passed.
--
-- Each index change is its own statement (MySQL 8, MariaDB and TiDB
-- alike).

-- +goose Up
ALTER TABLE workflow_runs ADD INDEX idx_runs_finished_id (finished_at, id);
ALTER TABLE workflow_runs DROP INDEX idx_runs_finished;

CREATE TABLE dagflow_leases (
    name       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    holder     VARCHAR(128) NOT NULL,
    expires_at DATETIME(6) NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE dagflow_leases;
ALTER TABLE workflow_runs ADD INDEX idx_runs_finished (finished_at);
ALTER TABLE workflow_runs DROP INDEX idx_runs_finished_id;
