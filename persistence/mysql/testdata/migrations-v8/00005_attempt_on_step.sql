-- The attempt in progress lives on its step row.
--
-- A forward attempt used to be a step_attempts row inserted by the claim
-- (outcome running) and updated when it ended: two row writes and two
-- index updates per step on the hot path. The step row now holds the
-- running attempt's worker and start (it already held its number, fence
-- and lease), and the attempt's row is written once, when the attempt
-- ends (succeeded, skipped, failed, lost). AttemptList shows an attempt in
-- progress from its step row. Rows of attempts claimed before this
-- migration (claimed_at NULL) are still finished by an update.

-- +goose Up
ALTER TABLE step_runs
    ADD COLUMN worker VARCHAR(255) NOT NULL DEFAULT '',
    ADD COLUMN claimed_at DATETIME(6) NULL;

-- +goose Down
ALTER TABLE step_runs DROP COLUMN claimed_at, DROP COLUMN worker;
