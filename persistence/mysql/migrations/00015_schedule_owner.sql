-- Schedules created, edited and deleted at run time.
--
-- owner is 'code' for a schedule a node declares and 'operator' once an
-- operator created, edited or deleted it through the API: a node that
-- declares an operator-owned schedule leaves it as it is.
-- deleted keeps a deleted schedule's row (and history) as a tombstone, so
-- that every node's change read sees the deletion.
-- changed_at is set by every change of a schedule's definition or flags
-- (never by a tick: last_tick moves without it). idx_schedules_changed
-- (changed_at, name) makes "which schedules changed since T" one range,
-- which each node reads every scheduler pass instead of the whole table.
--
-- The index is created after the ALTER that adds the column (TiDB).

-- +goose Up
ALTER TABLE schedules
    ADD COLUMN owner VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'code',
    ADD COLUMN deleted BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN changed_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000';
UPDATE schedules SET changed_at = updated_at;
CREATE INDEX idx_schedules_changed ON schedules (changed_at, name);

-- +goose Down
DROP INDEX idx_schedules_changed ON schedules;
ALTER TABLE schedules DROP COLUMN changed_at, DROP COLUMN deleted, DROP COLUMN owner;
