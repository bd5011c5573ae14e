-- +goose Up
-- Every delivery and attempt insert checked its tenant's row with a KEY SHARE lock: with most rows
-- of one tenant, every ingestion and take contended on that one row. Deliveries keep their tenant
-- through their event's (tenant_id, id) key; attempts through their delivery.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_tenant_id_fkey;
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_tenant_id_fkey;
-- (tenant_id, status, id) and the others serve a tenant's lists; this one only cost every write.
DROP INDEX webhook_deliveries_tenant;

-- +goose Down
CREATE INDEX webhook_deliveries_tenant ON webhook_deliveries (tenant_id, id);
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
