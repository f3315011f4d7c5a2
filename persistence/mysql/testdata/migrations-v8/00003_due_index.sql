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

-- +goose Up
ALTER TABLE step_runs
    ADD COLUMN due_at DATETIME(6) AS (CASE status
        WHEN 'queued' THEN queued_at
        WHEN 'retrying' THEN next_attempt_at
        WHEN 'running' THEN lease_expires_at
        WHEN 'compensating' THEN COALESCE(lease_expires_at, next_attempt_at, queued_at)
        WHEN 'dead' THEN finished_at
        ELSE NULL END) STORED,
    ADD COLUMN dead_workflow VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin
        AS (CASE WHEN status = 'dead' THEN workflow ELSE NULL END) STORED,
    ADD COLUMN dead_at DATETIME(6) AS (CASE WHEN status = 'dead' THEN finished_at ELSE NULL END) STORED,
    ADD INDEX idx_steps_due (status, due_at, run_id, step),
    ADD INDEX idx_steps_dead_wf (dead_workflow, dead_at, run_id, step),
    DROP INDEX idx_steps_status_queued,
    DROP INDEX idx_steps_status_next,
    DROP INDEX idx_steps_status_lease,
    DROP INDEX idx_steps_status_finished,
    DROP INDEX idx_steps_status_wf_finished;

ALTER TABLE workflow_runs
    ADD COLUMN start_due DATETIME(6) AS (CASE WHEN status = 'pending' THEN start_at ELSE NULL END) STORED,
    ADD INDEX idx_runs_start_due (start_due, id),
    DROP INDEX idx_runs_status_start;

-- +goose Down
ALTER TABLE workflow_runs
    ADD INDEX idx_runs_status_start (status, start_at),
    DROP INDEX idx_runs_start_due,
    DROP COLUMN start_due;

ALTER TABLE step_runs
    ADD INDEX idx_steps_status_queued (status, queued_at),
    ADD INDEX idx_steps_status_next (status, next_attempt_at),
    ADD INDEX idx_steps_status_lease (status, lease_expires_at),
    ADD INDEX idx_steps_status_finished (status, finished_at, run_id, step),
    ADD INDEX idx_steps_status_wf_finished (status, workflow, finished_at, run_id, step),
    DROP INDEX idx_steps_due,
    DROP INDEX idx_steps_dead_wf,
    DROP COLUMN dead_at,
    DROP COLUMN dead_workflow,
    DROP COLUMN due_at;
