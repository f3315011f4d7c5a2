-- Change detection for dashboards (see the MySQL migration 00011).

-- +goose Up
CREATE INDEX idx_steps_updated ON step_runs (updated_at, run_id);

-- +goose Down
DROP INDEX idx_steps_updated;
