-- Run priorities and pausing (runs and queues).
--
-- workflow_runs.priority is the run's priority (0 the default, higher
-- first); step_runs.priority repeats it on every step of the run, so that
-- whatever reads a step to enqueue it (a completion releasing it, a retry,
-- the reconciler) has it without reading the run. workflow_runs.paused_at
-- is set while the run is paused: no new step of it is claimed, and the
-- reconciler leaves its steps alone. Both are read with the run's row
-- (by primary key); nothing lists runs by them.
--
-- queue_pauses holds one row per paused queue (a handful at most): the
-- truth that each engine mirrors into Redis, where the dequeue script
-- reads it.

-- +goose Up
ALTER TABLE workflow_runs ADD COLUMN priority SMALLINT NOT NULL DEFAULT 0, ADD COLUMN paused_at DATETIME(6) NULL;
ALTER TABLE step_runs ADD COLUMN priority SMALLINT NOT NULL DEFAULT 0;
CREATE TABLE queue_pauses (
    queue     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    paused_at DATETIME(6) NOT NULL,
    PRIMARY KEY (queue)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE queue_pauses;
ALTER TABLE step_runs DROP COLUMN priority;
ALTER TABLE workflow_runs DROP COLUMN paused_at, DROP COLUMN priority;
