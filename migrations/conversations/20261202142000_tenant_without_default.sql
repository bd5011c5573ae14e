-- +goose Up
-- A row written with no tenant fails instead of landing in the default tenant: the plugin stamps every create.
ALTER TABLE conversations         ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE conversation_messages ALTER COLUMN tenant_id DROP DEFAULT;

-- +goose Down
ALTER TABLE conversation_messages ALTER COLUMN tenant_id SET DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE conversations         ALTER COLUMN tenant_id SET DEFAULT '00000000-0000-0000-0000-000000000001';
