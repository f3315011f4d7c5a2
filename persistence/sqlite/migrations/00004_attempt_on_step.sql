-- The attempt in progress lives on its step row (see the MySQL migration
-- 00005 for why): its worker and start, beside its number, fence and
-- lease; the attempt's row is written when the attempt ends.

-- +goose Up
ALTER TABLE step_runs ADD COLUMN worker TEXT NOT NULL DEFAULT '';
ALTER TABLE step_runs ADD COLUMN claimed_at TEXT;

-- +goose Down
ALTER TABLE step_runs DROP COLUMN claimed_at;
ALTER TABLE step_runs DROP COLUMN worker;
