-- The codec probe: one value the first engine with a payload codec
-- encodes, so that every node checks at start that its keyring opens
-- what the store holds (a node without the keys, or with wrong ones,
-- would fail what it claims and write errors under its own key). Its
-- own table rather than dagflow_meta, whose values are too short for
-- what some codecs make of a few bytes; one row, keyed by name.

-- +goose Up
CREATE TABLE codec_probe (
    name  VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    value LONGBLOB NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE codec_probe;
