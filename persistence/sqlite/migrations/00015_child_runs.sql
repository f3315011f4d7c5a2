-- Child workflows: a run's parent run and step (see the MySQL migration
-- 00016 for the columns and the index).

-- +goose Up
ALTER TABLE workflow_runs ADD COLUMN parent_run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_runs ADD COLUMN parent_step TEXT NOT NULL DEFAULT '';
CREATE INDEX idx_runs_parent ON workflow_runs (parent_run_id, parent_step, id);

-- +goose Down
DROP INDEX idx_runs_parent;
ALTER TABLE workflow_runs DROP COLUMN parent_step;
ALTER TABLE workflow_runs DROP COLUMN parent_run_id;
