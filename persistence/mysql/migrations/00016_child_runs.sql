-- Child workflows: a run started by a parent run's `child` step records
-- its parent (run id and step). idx_runs_parent (parent_run_id,
-- parent_step, id) makes "the children of run X" (Get, cancel
-- propagation, compensation, retention) one range. Runs without a parent
-- hold '' in both columns.
--
-- The index is created after the ALTER that adds the columns (TiDB).

-- +goose Up
ALTER TABLE workflow_runs
    ADD COLUMN parent_run_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    ADD COLUMN parent_step VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '';
CREATE INDEX idx_runs_parent ON workflow_runs (parent_run_id, parent_step, id);

-- +goose Down
DROP INDEX idx_runs_parent ON workflow_runs;
ALTER TABLE workflow_runs DROP COLUMN parent_step, DROP COLUMN parent_run_id;
