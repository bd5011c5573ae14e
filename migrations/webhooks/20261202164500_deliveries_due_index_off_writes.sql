-- +goose Up
-- Only the backlog gauge read this index; it now counts per subscription through
-- webhook_deliveries_subscription_due, as the sweep does. Each delivery wrote an entry at its
-- insert and at each outcome.
DROP INDEX webhook_deliveries_due;

-- +goose Down
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
