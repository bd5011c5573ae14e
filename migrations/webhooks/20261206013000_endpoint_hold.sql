-- +goose Up
-- Until when an endpoint that hangs is held: the sweep claims none of its deliveries before then and
-- the fan-out leaves them unclaimed, so no replica hands them to a send slot. Shared by every replica.
ALTER TABLE webhook_subscription_health ADD COLUMN held_until timestamptz;

-- +goose Down
ALTER TABLE webhook_subscription_health DROP COLUMN held_until;
