-- +goose Up
-- Every job insert for a tenant took a KEY SHARE lock on that tenant's row, so all enqueues on the hot
-- path contended on it, as deliveries did. Nothing is lost: tenants are never deleted (only disabled),
-- and a job's tenant_id is the tenant its enqueuer's context already acted for (an authenticated
-- token's tenant, or a tenant-owned row's).
ALTER TABLE jobs DROP CONSTRAINT jobs_tenant_id_fkey;

-- +goose Down
ALTER TABLE jobs ADD CONSTRAINT jobs_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
