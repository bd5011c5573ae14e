-- +goose Up
-- Notes no longer open per conversation; and a note written with no tenant fails instead of landing in the default one.
ALTER TABLE notes DROP COLUMN conversation_id;
ALTER TABLE notes ALTER COLUMN tenant_id DROP DEFAULT;

-- +goose Down
ALTER TABLE notes ALTER COLUMN tenant_id SET DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE notes ADD COLUMN conversation_id uuid UNIQUE;
