-- +goose Up
-- Transactional outbox, in watermill-sql's PostgreSQLQueueSchema layout (queue schema, delete on ack):
-- rows are written in the producer's transaction and deleted once RabbitMQ confirmed them.
-- "offset" is bigint (the library creates SERIAL) so the sequence cannot run out.
CREATE TABLE outbox_messages (
    "offset"     bigserial   PRIMARY KEY,
    "uuid"       varchar(36) NOT NULL,
    "payload"    json        DEFAULT NULL,
    "metadata"   json        DEFAULT NULL,
    "acked"      boolean     NOT NULL DEFAULT false,
    "created_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- +goose Down
DROP TABLE outbox_messages;
