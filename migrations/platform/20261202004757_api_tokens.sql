-- +goose Up
-- An API token acts for one tenant with a set of scopes. Only the SHA-256 of its secret is kept; the
-- token string (kt_<id>_<secret>) is shown once, at creation.
CREATE TABLE api_tokens (
    id           uuid        PRIMARY KEY,
    tenant_id    uuid        NOT NULL REFERENCES tenants (id),
    name         text        NOT NULL DEFAULT '',
    scopes       text[]      NOT NULL,
    hash         bytea       NOT NULL CHECK (length(hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    expires_at   timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_tokens_tenant ON api_tokens (tenant_id, created_at, id);

-- One fixed-window request counter per token, shared by every replica.
CREATE TABLE api_rate_windows (
    key          text        PRIMARY KEY,
    window_start timestamptz NOT NULL,
    count        integer     NOT NULL
);

-- +goose Down
DROP TABLE api_rate_windows;
DROP TABLE api_tokens;
