-- +goose Up
-- Retention walks the primary key (time-ordered ids) instead: this index took an entry from every
-- outcome that finished a delivery.
DROP INDEX webhook_deliveries_finished;

-- +goose Down
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (updated_at) WHERE status IN ('succeeded', 'failed');
