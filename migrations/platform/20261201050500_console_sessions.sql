-- +goose Up
-- A console session holds the API token it was opened with, sealed under a key derived from a secret
-- that only the browser's cookie carries: the row alone cannot be turned back into the token.
CREATE TABLE console_sessions (
    id           uuid PRIMARY KEY,
    secret_hash  bytea       NOT NULL,
    sealed_token bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX console_sessions_expires_at ON console_sessions (expires_at);

-- +goose Down
DROP TABLE console_sessions;
