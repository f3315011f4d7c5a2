-- Schedules created, edited and deleted at run time (see the MySQL
-- migration 00013 for the columns and the index).

-- +goose Up
ALTER TABLE schedules ADD COLUMN owner TEXT NOT NULL DEFAULT 'code';
ALTER TABLE schedules ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN changed_at TEXT NOT NULL DEFAULT '1970-01-01 00:00:00.000000';
UPDATE schedules SET changed_at = updated_at;
CREATE INDEX idx_schedules_changed ON schedules (changed_at, name);

-- +goose Down
DROP INDEX idx_schedules_changed;
ALTER TABLE schedules DROP COLUMN changed_at;
ALTER TABLE schedules DROP COLUMN deleted;
ALTER TABLE schedules DROP COLUMN owner;
