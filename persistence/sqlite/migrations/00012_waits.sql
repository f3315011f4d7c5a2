-- Wait, signal and sleep steps (see the MySQL migration 00015 for the
-- tables' and indexes' purpose). SQLite serializes writes, so
-- correlation_locks only keeps the two stores' SQL alike.

-- +goose Up
ALTER TABLE events ADD COLUMN correlation TEXT;
CREATE INDEX idx_events_correlation ON events (name, correlation, published_at);

CREATE TABLE step_waits (
    run_id      TEXT NOT NULL,
    step        TEXT NOT NULL,
    workflow    TEXT NOT NULL,
    kind        TEXT NOT NULL,
    event_name  TEXT NOT NULL DEFAULT '',
    correlation TEXT NOT NULL DEFAULT '',
    due_at      TEXT,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, step)
) STRICT;
CREATE INDEX idx_step_waits_match ON step_waits (event_name, correlation, run_id, step);
CREATE INDEX idx_step_waits_due ON step_waits (due_at, run_id, step);

CREATE TABLE correlation_locks (
    event_name  TEXT NOT NULL,
    correlation TEXT NOT NULL,
    PRIMARY KEY (event_name, correlation)
) STRICT;

-- +goose Down
DROP TABLE correlation_locks;
DROP TABLE step_waits;
DROP INDEX idx_events_correlation;
ALTER TABLE events DROP COLUMN correlation;
