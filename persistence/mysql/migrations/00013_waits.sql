-- Wait, signal and sleep steps (the `parked` step status).
--
-- events.correlation is the value a waiting step is matched by; a step
-- that parks looks for an event that came first through
-- idx_events_correlation (name, correlation, published_at), newest in
-- its lookback window first. The column is added and indexed in two
-- statements (TiDB indexes no column in the ALTER that adds it).
--
-- step_waits holds one row per parked step, and only while it is parked:
-- the step's row in step_runs says `parked`, this row says what ends the
-- wait. idx_step_waits_match (event_name, correlation, run_id, step) is
-- the one lookup an event makes to find its waiters; idx_step_waits_due
-- (due_at, run_id, step) is the range the timer reads (a sleep's wake-up
-- time, a wait's timeout). The rows are a table of their own rather than
-- a new case of step_runs.due_at: changing that stored generated column
-- would rebuild step_runs, the largest table.
--
-- correlation_locks has one tiny row per (event name, correlation) ever
-- waited on or published with a correlation: a publication and a park of
-- the same pair both lock it first, so the second sees what the first
-- wrote (TiDB takes no gap locks that would do it).

-- +goose Up
ALTER TABLE events ADD COLUMN correlation VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE events ADD INDEX idx_events_correlation (name, correlation, published_at);

CREATE TABLE step_waits (
    run_id      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    step        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind        VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    event_name  VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    correlation VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    due_at      DATETIME(6) NULL,
    created_at  DATETIME(6) NOT NULL,
    PRIMARY KEY (run_id, step),
    KEY idx_step_waits_match (event_name, correlation, run_id, step),
    KEY idx_step_waits_due (due_at, run_id, step)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE correlation_locks (
    event_name  VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    correlation VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (event_name, correlation)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE correlation_locks;
DROP TABLE step_waits;
ALTER TABLE events DROP INDEX idx_events_correlation;
ALTER TABLE events DROP COLUMN correlation;
