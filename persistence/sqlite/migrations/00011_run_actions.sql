-- Operator actions on finished runs, and reruns of completed steps (see
-- the MySQL migration 00012 for why). Migration 00010 is left to other
-- changes.

-- +goose Up
CREATE TABLE run_actions (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    at     TEXT NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    step   TEXT NOT NULL DEFAULT '',
    detail BLOB,
    PRIMARY KEY (run_id, seq)
) STRICT;

ALTER TABLE step_runs ADD COLUMN reruns INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE step_runs DROP COLUMN reruns;
DROP TABLE run_actions;
