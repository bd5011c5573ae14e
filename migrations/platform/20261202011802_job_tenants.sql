-- +goose Up
-- A job enqueued for a tenant runs in it; system jobs (sweeps, pruning) have none.
ALTER TABLE jobs ADD COLUMN tenant_id uuid REFERENCES tenants (id);

-- +goose Down
ALTER TABLE jobs DROP COLUMN tenant_id;
