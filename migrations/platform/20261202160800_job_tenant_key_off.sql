-- +goose Up
-- Every job insert for a tenant took KEY SHARE on that tenant's row, so enqueues on the hot path contended on it (as deliveries did).
-- Integrity holds without it: tenants are never deleted (only disabled), and a job's tenant is one its enqueuer's context already acted for.
ALTER TABLE jobs DROP CONSTRAINT jobs_tenant_id_fkey;

-- +goose Down
ALTER TABLE jobs ADD CONSTRAINT jobs_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
