-- +goose Up
-- A tenant is one customer of a shared deployment: everything it owns carries its id.
CREATE TABLE tenants (
    id          uuid        PRIMARY KEY,
    name        text        NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    disabled_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- Rows written before tenants existed, and the bootstrap API_TOKENS, belong to this one.
INSERT INTO tenants (id, name) VALUES ('00000000-0000-0000-0000-000000000001', 'default');

-- +goose Down
DROP TABLE tenants;
