-- +goose Up
-- Proposals belong to the tenant of their conversation; earlier rows go to the default one.
ALTER TABLE proposals ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES tenants (id);
DROP INDEX proposals_status;
DROP INDEX proposals_conversation;
CREATE INDEX proposals_tenant ON proposals (tenant_id, id);
CREATE INDEX proposals_status ON proposals (tenant_id, status, id);
CREATE INDEX proposals_conversation ON proposals (tenant_id, conversation_id, id);

-- +goose Down
DROP INDEX proposals_conversation;
DROP INDEX proposals_status;
DROP INDEX proposals_tenant;
CREATE INDEX proposals_status ON proposals (status, id);
CREATE INDEX proposals_conversation ON proposals (conversation_id, id);
ALTER TABLE proposals DROP COLUMN tenant_id;
