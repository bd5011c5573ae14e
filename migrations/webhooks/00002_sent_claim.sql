-- +goose Up
-- The claim whose attempt has started: the consumer takes a claim by setting it, in one conditional
-- UPDATE, before it sends; a second handler of the same claim finds it taken and sends nothing.
ALTER TABLE webhook_deliveries ADD COLUMN sent_claim_id uuid;

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN sent_claim_id;
