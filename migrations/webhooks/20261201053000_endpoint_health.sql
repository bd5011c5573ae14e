-- +goose Up
-- A subscription's sending state. paused and disabled subscriptions keep their pending deliveries
-- waiting; disabled_reason says why (manual, failing, gone).
ALTER TABLE webhook_subscriptions
    ADD COLUMN status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'disabled')),
    ADD COLUMN disabled_reason text NOT NULL DEFAULT '';
UPDATE webhook_subscriptions SET status = 'disabled', disabled_reason = 'manual' WHERE NOT enabled AND deleted_at IS NULL;

-- Health, written by every recorded attempt: apart from the subscription row so that outcomes never
-- change the subscription's version (If-Match keeps working on a failing endpoint).
CREATE TABLE webhook_subscription_health (
    subscription_id      uuid        PRIMARY KEY REFERENCES webhook_subscriptions (id),
    last_success_at      timestamptz,
    last_failure_at      timestamptz,
    failing_since        timestamptz, -- first failure of the current run of failures
    consecutive_failures integer     NOT NULL DEFAULT 0
);
INSERT INTO webhook_subscription_health (subscription_id) SELECT id FROM webhook_subscriptions;

-- The replica holding the claim: the one that claimed it, then the one sending it.
ALTER TABLE webhook_deliveries ADD COLUMN claimed_by text NOT NULL DEFAULT '';
-- The fair sweep reads each sending subscription's due rows in due order.
CREATE INDEX webhook_deliveries_subscription_due ON webhook_deliveries (subscription_id, next_attempt_at) WHERE status = 'pending';

-- Every request sent has an attempt row from the moment its claim is taken (result in_flight) until
-- its outcome: succeeded, failed, superseded (lost to a redelivery) or unknown (its replica stopped).
ALTER TABLE webhook_attempts
    ADD COLUMN subscription_id  uuid,
    ADD COLUMN result           text  NOT NULL DEFAULT 'failed'
        CHECK (result IN ('in_flight', 'succeeded', 'failed', 'superseded', 'unknown')),
    ADD COLUMN response_headers jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN instance         text  NOT NULL DEFAULT '';
UPDATE webhook_attempts a SET subscription_id = d.subscription_id,
    result = CASE WHEN a.error_class = '' AND a.status_code BETWEEN 200 AND 299 THEN 'succeeded' ELSE 'failed' END
FROM webhook_deliveries d WHERE d.id = a.delivery_id;
ALTER TABLE webhook_attempts ALTER COLUMN subscription_id SET NOT NULL;
-- Stats per subscription over a time window.
CREATE INDEX webhook_attempts_subscription_started ON webhook_attempts (subscription_id, started_at);

-- +goose Down
DROP INDEX webhook_attempts_subscription_started;
ALTER TABLE webhook_attempts DROP COLUMN subscription_id, DROP COLUMN result, DROP COLUMN response_headers, DROP COLUMN instance;
DROP INDEX webhook_deliveries_subscription_due;
ALTER TABLE webhook_deliveries DROP COLUMN claimed_by;
DROP TABLE webhook_subscription_health;
ALTER TABLE webhook_subscriptions DROP COLUMN status, DROP COLUMN disabled_reason;
