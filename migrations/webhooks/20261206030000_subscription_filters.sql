-- +goose Up
-- A subscription's content filter: a CEL expression over the event, evaluated at fan-out ('' = none).
-- A constant default adds the column without rewriting the table.
ALTER TABLE webhook_subscriptions ADD COLUMN filter text NOT NULL DEFAULT '' CHECK (length(filter) <= 4096);

-- +goose Down
ALTER TABLE webhook_subscriptions DROP COLUMN filter;
