-- The codec probe (see the MySQL migration 00019).

-- +goose Up
CREATE TABLE codec_probe (
    name  TEXT NOT NULL PRIMARY KEY,
    value BLOB NOT NULL
);

-- +goose Down
DROP TABLE codec_probe;
