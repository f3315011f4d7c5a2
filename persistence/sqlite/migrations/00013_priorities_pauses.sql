-- Run priorities and pausing (see the MySQL migration 00011).

-- +goose Up
ALTER TABLE workflow_runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_runs ADD COLUMN paused_at TEXT;
ALTER TABLE step_runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
CREATE TABLE queue_pauses (
    queue     TEXT NOT NULL PRIMARY KEY,
    paused_at TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE queue_pauses;
ALTER TABLE step_runs DROP COLUMN priority;
ALTER TABLE workflow_runs DROP COLUMN paused_at;
ALTER TABLE workflow_runs DROP COLUMN priority;
