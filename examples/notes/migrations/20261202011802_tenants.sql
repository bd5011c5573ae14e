-- +goose Up
-- Notes belong to a tenant; earlier rows go to the default one.
ALTER TABLE notes ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES tenants (id);
CREATE INDEX notes_tenant ON notes (tenant_id, id);

-- +goose Down
DROP INDEX notes_tenant;
ALTER TABLE notes DROP COLUMN tenant_id;
