-- dagflow schema, SQLite 3.37+ (STRICT tables). Same shape as the MySQL
-- schema; times are TEXT in the fixed-width form
-- 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC), which sorts in time order.

-- +goose Up
CREATE TABLE workflow_runs (
    id              TEXT NOT NULL PRIMARY KEY,
    workflow        TEXT NOT NULL,
    version         INTEGER NOT NULL DEFAULT 0,
    status          TEXT NOT NULL,
    input           BLOB,
    output          BLOB,
    error           TEXT,
    idempotency_key TEXT,
    metadata        BLOB,
    schedule        TEXT NOT NULL DEFAULT '',
    scheduled_tick  TEXT,
    start_at        TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    started_at      TEXT,
    finished_at     TEXT,
    updated_at      TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX uq_runs_idempotency ON workflow_runs (workflow, idempotency_key);
CREATE INDEX idx_runs_status_start ON workflow_runs (status, start_at);
CREATE INDEX idx_runs_created ON workflow_runs (created_at, id);
CREATE INDEX idx_runs_wf_created ON workflow_runs (workflow, created_at, id);
CREATE INDEX idx_runs_status_created ON workflow_runs (status, created_at, id);
CREATE INDEX idx_runs_wf_status_created ON workflow_runs (workflow, status, created_at, id);
CREATE INDEX idx_runs_finished ON workflow_runs (finished_at);

CREATE TABLE step_runs (
    run_id           TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    step             TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    workflow         TEXT NOT NULL,
    queue            TEXT NOT NULL,
    status           TEXT NOT NULL,
    deps             TEXT NOT NULL,
    dependents       TEXT NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 0,
    pending_deps     INTEGER NOT NULL DEFAULT 0,
    comp_attempt     INTEGER NOT NULL DEFAULT 0,
    fence            TEXT NOT NULL DEFAULT '',
    lease_expires_at TEXT,
    next_attempt_at  TEXT,
    output           BLOB,
    error            TEXT,
    queued_at        TEXT,
    started_at       TEXT,
    finished_at      TEXT,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (run_id, step)
) STRICT;
CREATE INDEX idx_steps_status_queued ON step_runs (status, queued_at);
CREATE INDEX idx_steps_status_next ON step_runs (status, next_attempt_at);
CREATE INDEX idx_steps_status_lease ON step_runs (status, lease_expires_at);
CREATE INDEX idx_steps_status_finished ON step_runs (status, finished_at, run_id, step);
CREATE INDEX idx_steps_status_wf_finished ON step_runs (status, workflow, finished_at, run_id, step);

CREATE TABLE step_attempts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL,
    step        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    worker      TEXT NOT NULL,
    fence       TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    error       TEXT,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    FOREIGN KEY (run_id, step) REFERENCES step_runs (run_id, step) ON DELETE CASCADE
) STRICT;
CREATE INDEX idx_attempts_run ON step_attempts (run_id, id);
CREATE INDEX idx_attempts_step ON step_attempts (run_id, step, fence);

CREATE TABLE schedules (
    name               TEXT NOT NULL PRIMARY KEY,
    spec               TEXT NOT NULL,
    time_zone          TEXT NOT NULL DEFAULT '',
    workflow           TEXT NOT NULL,
    input              BLOB,
    overlap_policy     TEXT NOT NULL,
    catch_up           TEXT NOT NULL,
    catch_up_window_us INTEGER NOT NULL DEFAULT 0,
    paused             INTEGER NOT NULL DEFAULT 0,
    disabled           INTEGER NOT NULL DEFAULT 0,
    last_tick          TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
) STRICT;

CREATE TABLE schedule_ticks (
    schedule   TEXT NOT NULL,
    tick       TEXT NOT NULL,
    outcome    TEXT NOT NULL,
    run_id     TEXT NOT NULL DEFAULT '',
    reason     TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (schedule, tick)
) STRICT;

-- +goose Down
DROP TABLE schedule_ticks;
DROP TABLE schedules;
DROP TABLE step_attempts;
DROP TABLE step_runs;
DROP TABLE workflow_runs;
