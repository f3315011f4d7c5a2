-- One reconciler index on step_runs instead of five status-led ones.
--
-- Every status change of a step rewrote the entries of all five
-- (status, ...) indexes; at full load that index maintenance was most of
-- MariaDB's CPU. due_at is the one time the reconciler (or the dead-letter
-- list) orders a step by, derived from its status, so one (status, due_at)
-- index serves the queued, retry-due, lease-expired and dead queries, and
-- a status change rewrites one entry. The workflow filter of the
-- dead-letter list gets its own index over columns that are NULL until a
-- step dies, so live steps never touch it. Runs waiting for start_at get
-- the same treatment: start_due is NULL once a run has started.
--
-- The generated columns come with a rebuild of both tables rather than an
-- ALTER: TiDB cannot add a stored generated column to a table (error
-- 3106), nor index a column in the ALTER that adds it. The rebuilt tables
-- are those the ALTERs of earlier releases made (the new columns last,
-- the same indexes; the foreign keys, dropped for the copy, added back),
-- so a database migrated either way has one schema. A database past this
-- version never runs it again.

-- +goose Up
ALTER TABLE step_attempts DROP FOREIGN KEY fk_attempts_step;
ALTER TABLE step_runs DROP FOREIGN KEY fk_steps_run;

CREATE TABLE workflow_runs_v3 (
    id              VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version         INT NOT NULL DEFAULT 0,
    status          VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    input           LONGBLOB NULL,
    output          LONGBLOB NULL,
    error           MEDIUMTEXT NULL,
    idempotency_key VARBINARY(255) NULL,
    metadata        LONGBLOB NULL,
    schedule        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    scheduled_tick  DATETIME(6) NULL,
    start_at        DATETIME(6) NOT NULL,
    created_at      DATETIME(6) NOT NULL,
    started_at      DATETIME(6) NULL,
    finished_at     DATETIME(6) NULL,
    updated_at      DATETIME(6) NOT NULL,
    start_due       DATETIME(6) AS (CASE WHEN status = 'pending' THEN start_at ELSE NULL END) STORED,
    PRIMARY KEY (id),
    UNIQUE KEY uq_runs_idempotency (workflow, idempotency_key),
    KEY idx_runs_created (created_at, id),
    KEY idx_runs_wf_created (workflow, created_at, id),
    KEY idx_runs_status_created (status, created_at, id),
    KEY idx_runs_wf_status_created (workflow, status, created_at, id),
    KEY idx_runs_finished (finished_at),
    KEY idx_runs_schedule_created (schedule, created_at, id),
    KEY idx_runs_start_due (start_due, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT INTO workflow_runs_v3 (id, workflow, version, status, input, output, error, idempotency_key, metadata,
        schedule, scheduled_tick, start_at, created_at, started_at, finished_at, updated_at)
    SELECT id, workflow, version, status, input, output, error, idempotency_key, metadata,
        schedule, scheduled_tick, start_at, created_at, started_at, finished_at, updated_at
    FROM workflow_runs;

CREATE TABLE step_runs_v3 (
    run_id           VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    step             VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq              INT NOT NULL,
    workflow         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    queue            VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    status           VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    deps             TEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    dependents       TEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempt          INT NOT NULL DEFAULT 0,
    max_attempts     INT NOT NULL DEFAULT 0,
    pending_deps     INT NOT NULL DEFAULT 0,
    comp_attempt     INT NOT NULL DEFAULT 0,
    fence            VARBINARY(128) NOT NULL DEFAULT '',
    lease_expires_at DATETIME(6) NULL,
    next_attempt_at  DATETIME(6) NULL,
    output           LONGBLOB NULL,
    error            MEDIUMTEXT NULL,
    queued_at        DATETIME(6) NULL,
    started_at       DATETIME(6) NULL,
    finished_at      DATETIME(6) NULL,
    updated_at       DATETIME(6) NOT NULL,
    due_at           DATETIME(6) AS (CASE status
        WHEN 'queued' THEN queued_at
        WHEN 'retrying' THEN next_attempt_at
        WHEN 'running' THEN lease_expires_at
        WHEN 'compensating' THEN COALESCE(lease_expires_at, next_attempt_at, queued_at)
        WHEN 'dead' THEN finished_at
        ELSE NULL END) STORED,
    dead_workflow    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin
        AS (CASE WHEN status = 'dead' THEN workflow ELSE NULL END) STORED,
    dead_at          DATETIME(6) AS (CASE WHEN status = 'dead' THEN finished_at ELSE NULL END) STORED,
    PRIMARY KEY (run_id, step),
    KEY idx_steps_due (status, due_at, run_id, step),
    KEY idx_steps_dead_wf (dead_workflow, dead_at, run_id, step)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT INTO step_runs_v3 (run_id, step, seq, workflow, queue, status, deps, dependents, attempt, max_attempts,
        pending_deps, comp_attempt, fence, lease_expires_at, next_attempt_at, output, error, queued_at,
        started_at, finished_at, updated_at)
    SELECT run_id, step, seq, workflow, queue, status, deps, dependents, attempt, max_attempts,
        pending_deps, comp_attempt, fence, lease_expires_at, next_attempt_at, output, error, queued_at,
        started_at, finished_at, updated_at
    FROM step_runs;

RENAME TABLE workflow_runs TO workflow_runs_v2, workflow_runs_v3 TO workflow_runs,
    step_runs TO step_runs_v2, step_runs_v3 TO step_runs;
DROP TABLE step_runs_v2;
DROP TABLE workflow_runs_v2;

ALTER TABLE step_runs ADD CONSTRAINT fk_steps_run FOREIGN KEY (run_id) REFERENCES workflow_runs (id) ON DELETE CASCADE;
ALTER TABLE step_attempts ADD CONSTRAINT fk_attempts_step FOREIGN KEY (run_id, step) REFERENCES step_runs (run_id, step) ON DELETE CASCADE;

-- +goose Down
-- Indexes first, then the columns they covered, one change a statement
-- (TiDB drops no column that an index still covers).
ALTER TABLE workflow_runs ADD INDEX idx_runs_status_start (status, start_at);
ALTER TABLE workflow_runs DROP INDEX idx_runs_start_due;
ALTER TABLE workflow_runs DROP COLUMN start_due;

ALTER TABLE step_runs ADD INDEX idx_steps_status_queued (status, queued_at);
ALTER TABLE step_runs ADD INDEX idx_steps_status_next (status, next_attempt_at);
ALTER TABLE step_runs ADD INDEX idx_steps_status_lease (status, lease_expires_at);
ALTER TABLE step_runs ADD INDEX idx_steps_status_finished (status, finished_at, run_id, step);
ALTER TABLE step_runs ADD INDEX idx_steps_status_wf_finished (status, workflow, finished_at, run_id, step);
ALTER TABLE step_runs DROP INDEX idx_steps_due;
ALTER TABLE step_runs DROP INDEX idx_steps_dead_wf;
ALTER TABLE step_runs DROP COLUMN dead_at;
ALTER TABLE step_runs DROP COLUMN dead_workflow;
ALTER TABLE step_runs DROP COLUMN due_at;
