-- +goose Up
-- Custom headers sent with every attempt (e.g. Authorization for the receiver), a JSON object stored
-- as text beside the secret so that the secrets' protection covers it too.
ALTER TABLE webhook_subscriptions ADD COLUMN headers text NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE webhook_subscriptions DROP COLUMN headers;
