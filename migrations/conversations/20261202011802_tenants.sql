-- +goose Up
-- Conversations and their messages belong to a tenant; earlier rows go to the default one.
ALTER TABLE conversations         ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES tenants (id);
ALTER TABLE conversation_messages ADD COLUMN tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES tenants (id);
CREATE INDEX conversations_tenant ON conversations (tenant_id, id);
DROP INDEX conversation_messages_conversation;
CREATE INDEX conversation_messages_conversation ON conversation_messages (tenant_id, conversation_id, created_at, id);

-- +goose Down
DROP INDEX conversation_messages_conversation;
CREATE INDEX conversation_messages_conversation ON conversation_messages (conversation_id, created_at, id);
DROP INDEX conversations_tenant;
ALTER TABLE conversation_messages DROP COLUMN tenant_id;
ALTER TABLE conversations         DROP COLUMN tenant_id;
