-- +goose Up
-- Idempotency-Key: one row per (owner, route, key). A request claims it (lock_token, locked_until)
-- in its own committed statement, then stores its response in the handler's transaction.
CREATE TABLE idempotency_keys (
    owner          text        NOT NULL,
    route          text        NOT NULL,
    key            text        NOT NULL,
    fingerprint    bytea       NOT NULL,
    lock_token     uuid,
    locked_until   timestamptz,
    status         integer,
    headers        jsonb,
    body           bytea,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, route, key)
);
-- Pruning of keys past their lifetime.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
