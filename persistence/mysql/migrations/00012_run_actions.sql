-- Operator actions on finished runs, and reruns of completed steps.
--
-- run_actions is a run's operator history: one row per retry, rerun or
-- skip, with who asked (an API key's name, "cli", or a name a Go caller
-- gave) and when. Its primary key (run_id, seq) keeps a run's actions
-- together: listing them is one range of it, and so is deleting them
-- with their run (retention). seq is the action's number within its run,
-- written under the run's row lock.
--
-- step_runs.reruns counts how often a step that had completed (succeeded,
-- or succeeded and was compensated) was put back to run again. It makes
-- the idempotency key handed to the handler a new one, so that a service
-- that deduplicated (or honoured the undo of) the earlier execution does
-- not silently answer with it.
--
-- Migration 00011 is left to other changes.

-- +goose Up
CREATE TABLE run_actions (
    run_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq    INT NOT NULL,
    at     DATETIME(6) NOT NULL,
    actor  VARCHAR(255) NOT NULL,
    action VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    step   VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    detail LONGBLOB NULL,
    PRIMARY KEY (run_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE step_runs ADD COLUMN reruns INT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE step_runs DROP COLUMN reruns;
DROP TABLE run_actions;
