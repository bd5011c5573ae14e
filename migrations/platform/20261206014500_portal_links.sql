-- +goose Up
-- A portal link opens the console for one tenant's customer: narrowed to event types, read-only or
-- not, once or until it expires. The link string is signed (PORTAL_LINK_KEY) over this row's claims.
CREATE TABLE portal_links (
    id          uuid        PRIMARY KEY,
    tenant_id   uuid        NOT NULL REFERENCES tenants (id),
    name        text        NOT NULL DEFAULT '',
    event_types text[]      NOT NULL DEFAULT '{}',
    read_only   boolean     NOT NULL,
    once        boolean     NOT NULL,
    created_by  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    revoked_at  timestamptz
);
CREATE INDEX portal_links_tenant ON portal_links (tenant_id, id);

-- A session opened from a link ends with it: revoking the link deletes its sessions and revokes the
-- API token each was given.
ALTER TABLE console_sessions
    ADD COLUMN portal_link_id uuid REFERENCES portal_links (id) ON DELETE CASCADE,
    ADD COLUMN api_token_id   uuid;
CREATE INDEX console_sessions_portal_link ON console_sessions (portal_link_id) WHERE portal_link_id IS NOT NULL;

-- +goose Down
ALTER TABLE console_sessions DROP COLUMN api_token_id, DROP COLUMN portal_link_id;
DROP TABLE portal_links;
