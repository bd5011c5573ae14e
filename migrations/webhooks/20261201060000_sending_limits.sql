-- +goose Up
-- An optional per-subscription rate limit (requests per second), enforced across replicas.
ALTER TABLE webhook_subscriptions ADD COLUMN rate_limit double precision
    CHECK (rate_limit IS NULL OR (rate_limit >= 0.1 AND rate_limit <= 10000));
-- The send time a rate-limited delivery reserved before it was put back to wait for it.
ALTER TABLE webhook_deliveries ADD COLUMN rate_slot_at timestamptz;
-- GCRA state per rate-limited subscription: the theoretical arrival time of the next request.
-- Unlogged: after a crash it starts empty, which only lets one burst through.
CREATE UNLOGGED TABLE webhook_rate_limits (
    subscription_id uuid        PRIMARY KEY,
    tat             timestamptz NOT NULL
);

-- +goose Down
DROP TABLE webhook_rate_limits;
ALTER TABLE webhook_deliveries DROP COLUMN rate_slot_at;
ALTER TABLE webhook_subscriptions DROP COLUMN rate_limit;
