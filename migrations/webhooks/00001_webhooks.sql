-- +goose Up
-- Receivers and the event types they want; deleted ones stay for the history of their deliveries.
CREATE TABLE webhook_subscriptions (
    id                         uuid        PRIMARY KEY,
    url                        text        NOT NULL CHECK (length(url) <= 2048),
    event_types                jsonb       NOT NULL CHECK (jsonb_typeof(event_types) = 'array'),
    description                text        NOT NULL DEFAULT '',
    enabled                    boolean     NOT NULL,
    secret                     text        NOT NULL,
    previous_secret            text        NOT NULL DEFAULT '',
    previous_secret_expires_at timestamptz,
    created_at                 timestamptz NOT NULL,
    updated_at                 timestamptz NOT NULL,
    deleted_at                 timestamptz
);
-- Fan-out reads the live, enabled subscriptions of every event.
CREATE INDEX webhook_subscriptions_active ON webhook_subscriptions (id) WHERE enabled AND deleted_at IS NULL;

-- Events to deliver; the id is the client's (or the integration event's), which makes ingestion idempotent.
CREATE TABLE webhook_events (
    id         text        PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_-]{1,128}$'),
    type       text        NOT NULL,
    data       jsonb       NOT NULL,
    created_at timestamptz NOT NULL
);

-- One event to one subscription. claim_id is the fencing token of whoever may send it now.
CREATE TABLE webhook_deliveries (
    id               uuid        PRIMARY KEY,
    subscription_id  uuid        NOT NULL REFERENCES webhook_subscriptions (id),
    event_id         text        NOT NULL REFERENCES webhook_events (id),
    event_type       text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempt_count    integer     NOT NULL DEFAULT 0,
    round_failures   integer     NOT NULL DEFAULT 0,
    next_trigger     text        NOT NULL DEFAULT 'scheduled' CHECK (next_trigger IN ('scheduled', 'redeliver')),
    next_attempt_at  timestamptz,
    claim_id         uuid,
    last_status_code integer,
    last_error       text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CONSTRAINT webhook_deliveries_event_subscription UNIQUE (event_id, subscription_id)
);
-- The sweep: due pending rows in due order.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- Delivery list filters (newest first, keyset on id).
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, id);
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (status, id);
CREATE INDEX webhook_deliveries_event_type ON webhook_deliveries (event_type, id);

-- Every attempt, whatever its outcome.
CREATE TABLE webhook_attempts (
    id               uuid        PRIMARY KEY,
    delivery_id      uuid        NOT NULL REFERENCES webhook_deliveries (id),
    number           integer     NOT NULL,
    trigger          text        NOT NULL CHECK (trigger IN ('scheduled', 'redeliver')),
    started_at       timestamptz NOT NULL,
    duration_ms      integer     NOT NULL,
    status_code      integer,
    error_class      text        NOT NULL DEFAULT '',
    error            text        NOT NULL DEFAULT '',
    response_excerpt text        NOT NULL DEFAULT '',
    CONSTRAINT webhook_attempts_delivery_number UNIQUE (delivery_id, number)
);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhook_subscriptions;
