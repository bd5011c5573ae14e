-- +goose Up
-- Everything of the module belongs to a tenant; rows written before tenants existed go to the default one.
ALTER TABLE webhook_subscriptions ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES tenants (id);
ALTER TABLE webhook_events        ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES tenants (id);
ALTER TABLE webhook_deliveries    ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES tenants (id);
ALTER TABLE webhook_attempts      ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES tenants (id);
ALTER TABLE webhook_operations    ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES tenants (id);

-- A client chooses its event ids: they are unique within its tenant, not across customers.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_fkey;
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event
    FOREIGN KEY (tenant_id, event_id) REFERENCES webhook_events (tenant_id, id);

-- Lists and fan-out read one tenant's rows: their indexes lead with tenant_id.
DROP INDEX webhook_subscriptions_active;
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant_id, id) WHERE deleted_at IS NULL;
DROP INDEX webhook_deliveries_subscription;
DROP INDEX webhook_deliveries_status;
DROP INDEX webhook_deliveries_event_type;
CREATE INDEX webhook_deliveries_tenant ON webhook_deliveries (tenant_id, id);
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (tenant_id, subscription_id, id);
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (tenant_id, status, id);
CREATE INDEX webhook_deliveries_event_type ON webhook_deliveries (tenant_id, event_type, id);

-- +goose Down
DROP INDEX webhook_deliveries_event_type;
DROP INDEX webhook_deliveries_status;
DROP INDEX webhook_deliveries_subscription;
DROP INDEX webhook_deliveries_tenant;
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, id);
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (status, id);
CREATE INDEX webhook_deliveries_event_type ON webhook_deliveries (event_type, id);
DROP INDEX webhook_subscriptions_tenant;
CREATE INDEX webhook_subscriptions_active ON webhook_subscriptions (id) WHERE enabled AND deleted_at IS NULL;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event;
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_pkey, ADD PRIMARY KEY (id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES webhook_events (id);
ALTER TABLE webhook_operations    DROP COLUMN tenant_id;
ALTER TABLE webhook_attempts      DROP COLUMN tenant_id;
ALTER TABLE webhook_deliveries    DROP COLUMN tenant_id;
ALTER TABLE webhook_events        DROP COLUMN tenant_id;
ALTER TABLE webhook_subscriptions DROP COLUMN tenant_id;
