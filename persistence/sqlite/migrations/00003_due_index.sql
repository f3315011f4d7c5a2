-- One reconciler index on step_runs instead of five status-led ones (see
-- the MySQL migration of the same number for why). SQLite can only add
-- VIRTUAL generated columns; indexes over them are stored.

-- +goose Up
ALTER TABLE step_runs ADD COLUMN due_at TEXT GENERATED ALWAYS AS (CASE status
    WHEN 'queued' THEN queued_at
    WHEN 'retrying' THEN next_attempt_at
    WHEN 'running' THEN lease_expires_at
    WHEN 'compensating' THEN COALESCE(lease_expires_at, next_attempt_at, queued_at)
    WHEN 'dead' THEN finished_at
    ELSE NULL END) VIRTUAL;
ALTER TABLE step_runs ADD COLUMN dead_workflow TEXT GENERATED ALWAYS AS (CASE WHEN status = 'dead' THEN workflow ELSE NULL END) VIRTUAL;
ALTER TABLE step_runs ADD COLUMN dead_at TEXT GENERATED ALWAYS AS (CASE WHEN status = 'dead' THEN finished_at ELSE NULL END) VIRTUAL;
CREATE INDEX idx_steps_due ON step_runs (status, due_at, run_id, step);
CREATE INDEX idx_steps_dead_wf ON step_runs (dead_workflow, dead_at, run_id, step);
DROP INDEX idx_steps_status_queued;
DROP INDEX idx_steps_status_next;
DROP INDEX idx_steps_status_lease;
DROP INDEX idx_steps_status_finished;
DROP INDEX idx_steps_status_wf_finished;

ALTER TABLE workflow_runs ADD COLUMN start_due TEXT GENERATED ALWAYS AS (CASE WHEN status = 'pending' THEN start_at ELSE NULL END) VIRTUAL;
CREATE INDEX idx_runs_start_due ON workflow_runs (start_due, id);
DROP INDEX idx_runs_status_start;

-- +goose Down
CREATE INDEX idx_runs_status_start ON workflow_runs (status, start_at);
DROP INDEX idx_runs_start_due;
ALTER TABLE workflow_runs DROP COLUMN start_due;

CREATE INDEX idx_steps_status_queued ON step_runs (status, queued_at);
CREATE INDEX idx_steps_status_next ON step_runs (status, next_attempt_at);
CREATE INDEX idx_steps_status_lease ON step_runs (status, lease_expires_at);
CREATE INDEX idx_steps_status_finished ON step_runs (status, finished_at, run_id, step);
CREATE INDEX idx_steps_status_wf_finished ON step_runs (status, workflow, finished_at, run_id, step);
DROP INDEX idx_steps_due;
DROP INDEX idx_steps_dead_wf;
ALTER TABLE step_runs DROP COLUMN dead_at;
ALTER TABLE step_runs DROP COLUMN dead_workflow;
ALTER TABLE step_runs DROP COLUMN due_at;
