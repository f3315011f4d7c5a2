-- Isolation between workloads: reconcile by workflow, a store identity,
-- a node registry.
--
-- An engine reconciles only the workflows it runs, each from its own
-- index range, so that a backlog of a workflow no node of its kind runs
-- is never read: the reconciler's step index is led by (status,
-- workflow) instead of status alone (workflow never changes, so a status
-- change still rewrites one entry), and due pending runs get a
-- (workflow, start_due) index. The unfiltered dead-letter list, which the
-- old index served with status = 'dead', gets its own index over dead_at,
-- NULL until a step dies, so that live steps never touch it.
--
-- dagflow_meta holds the store's id, written here (a least-privilege
-- user that cannot migrate can still read it); an engine binds its Redis
-- prefix to it. dagflow_nodes is the node registry: each engine's
-- heartbeat and what it can run.
--
-- Each index change is its own statement, and no column is added
-- (MySQL 8, MariaDB and TiDB alike).

-- +goose Up
ALTER TABLE step_runs ADD INDEX idx_steps_wf_due (status, workflow, due_at, run_id, step);
ALTER TABLE step_runs ADD INDEX idx_steps_dead (dead_at, run_id, step);
ALTER TABLE step_runs DROP INDEX idx_steps_due;
ALTER TABLE workflow_runs ADD INDEX idx_runs_wf_start_due (workflow, start_due, id);

CREATE TABLE dagflow_meta (
    name  VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    value VARCHAR(255) NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO dagflow_meta (name, value) VALUES ('store_id', UUID());

CREATE TABLE dagflow_nodes (
    id           VARCHAR(128) NOT NULL,
    started_at   DATETIME(6) NOT NULL,
    heartbeat_at DATETIME(6) NOT NULL,
    info         MEDIUMBLOB NULL,
    PRIMARY KEY (id),
    KEY idx_nodes_heartbeat (heartbeat_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE dagflow_nodes;
DROP TABLE dagflow_meta;
ALTER TABLE workflow_runs DROP INDEX idx_runs_wf_start_due;
ALTER TABLE step_runs ADD INDEX idx_steps_due (status, due_at, run_id, step);
ALTER TABLE step_runs DROP INDEX idx_steps_dead;
ALTER TABLE step_runs DROP INDEX idx_steps_wf_due;
