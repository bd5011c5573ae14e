-- +goose Up
-- A row written with no tenant fails instead of landing in the default tenant: the plugin stamps every
-- create, and raw inserts name tenant_id.
ALTER TABLE webhook_subscriptions ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE webhook_events        ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE webhook_deliveries    ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE webhook_attempts      ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE webhook_operations    ALTER COLUMN tenant_id DROP DEFAULT;

-- +goose Down
ALTER TABLE webhook_operations    ALTER COLUMN tenant_id SET DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE webhook_attempts      ALTER COLUMN tenant_id SET DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE webhook_deliveries    ALTER COLUMN tenant_id SET DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE webhook_events        ALTER COLUMN tenant_id SET DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE webhook_subscriptions ALTER COLUMN tenant_id SET DEFAULT '00000000-0000-0000-0000-000000000001';
