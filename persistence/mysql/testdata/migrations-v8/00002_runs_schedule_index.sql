-- The scheduler asks for the newest runs of one schedule (overlap
-- policies skip and buffer_one); RunList's Schedule filter uses this index.

-- +goose Up
CREATE INDEX idx_runs_schedule_created ON workflow_runs (schedule, created_at, id);

-- +goose Down
DROP INDEX idx_runs_schedule_created ON workflow_runs;
