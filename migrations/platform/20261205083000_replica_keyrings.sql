-- +goose Up
-- The encryption key ids each serving replica holds (KEELSON_ENCRYPTION_KEYS), refreshed while it runs:
-- `keelson secrets reencrypt` and a starting replica refuse to seal under a key a live replica lacks.
CREATE TABLE replica_keyrings (
    instance_id text        PRIMARY KEY,
    key_ids     text[]      NOT NULL,
    seen_at     timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE replica_keyrings;
