-- Change detection for dashboards: idx_steps_updated (updated_at, run_id)
-- serves "which runs changed since T" (StepListChanged) as one range of
-- an index that covers the query, so that a process with dashboards open
-- asks one cheap question a second however many pages watch it. Every
-- transition of a step (and so every change of a run) sets updated_at.

-- +goose Up
CREATE INDEX idx_steps_updated ON step_runs (updated_at, run_id);

-- +goose Down
DROP INDEX idx_steps_updated ON step_runs;
