-- Published events and the runs they started (see the MySQL migration
-- 00012 for the indexes' purpose). Migrations 00008-00010 are left to
-- other changes.

-- +goose Up
CREATE TABLE events (
    id            TEXT NOT NULL PRIMARY KEY,
    name          TEXT NOT NULL,
    payload       BLOB,
    published_at  TEXT NOT NULL,
    dispatched_at TEXT
) STRICT;
CREATE INDEX idx_events_published ON events (published_at, id);
CREATE INDEX idx_events_name_published ON events (name, published_at, id);
CREATE INDEX idx_events_pending ON events (dispatched_at, published_at, id);

CREATE TABLE event_runs (
    event_id TEXT NOT NULL,
    workflow TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    PRIMARY KEY (event_id, workflow)
) STRICT;
CREATE INDEX idx_event_runs_run ON event_runs (run_id);

-- +goose Down
DROP TABLE event_runs;
DROP TABLE events;
