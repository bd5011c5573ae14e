-- +goose Up
-- Background operations started over the API (bulk recovery): their status, counts and progress.
CREATE TABLE webhook_operations (
    id              uuid        PRIMARY KEY,
    kind            text        NOT NULL CHECK (kind IN ('recover')),
    subscription_id uuid        NOT NULL REFERENCES webhook_subscriptions (id),
    since           timestamptz NOT NULL,
    until           timestamptz,
    status          text        NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    total           integer     NOT NULL DEFAULT 0,
    requeued        integer     NOT NULL DEFAULT 0,
    -- The last delivery id handled: the next batch starts after it (delivery ids are time-ordered v7).
    cursor          uuid,
    error           text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    finished_at     timestamptz
);

-- Retention: finished deliveries in the order they finished, and events by age.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (updated_at) WHERE status IN ('succeeded', 'failed');
CREATE INDEX webhook_events_created_at ON webhook_events (created_at);

-- +goose Down
DROP INDEX webhook_events_created_at;
DROP INDEX webhook_deliveries_finished;
DROP TABLE webhook_operations;
