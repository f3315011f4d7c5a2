-- Published events and the runs they started.
--
-- events holds one row per event id: publishing an id again finds it, so
-- an event starts its runs once however often it is published. Listings
-- read idx_events_published (published_at, id) or, by name,
-- idx_events_name_published (name, published_at, id), newest first.
-- dispatched_at is NULL while an event recorded in an application's
-- transaction waits for an engine to hand its runs to the queues;
-- idx_events_pending (dispatched_at, published_at, id) makes those few a
-- range that never reads the dispatched ones.
--
-- event_runs links an event to the run it started for each workflow.
-- idx_event_runs_run (run_id) finds the event of a run, so that
-- retention can delete an event with its runs.
--
-- Migrations 00009-00011 are left to other changes.

-- +goose Up
CREATE TABLE events (
    id            VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name          VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    payload       LONGBLOB NULL,
    published_at  DATETIME(6) NOT NULL,
    dispatched_at DATETIME(6) NULL,
    PRIMARY KEY (id),
    KEY idx_events_published (published_at, id),
    KEY idx_events_name_published (name, published_at, id),
    KEY idx_events_pending (dispatched_at, published_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE event_runs (
    event_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    run_id   VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    PRIMARY KEY (event_id, workflow),
    KEY idx_event_runs_run (run_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE event_runs;
DROP TABLE events;
