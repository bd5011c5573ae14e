-- +goose Up
-- Inbox: one row per (consumer, message) so a redelivered message takes effect once.
CREATE TABLE inbox_messages (
    consumer     text        NOT NULL,
    message_id   text        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX inbox_messages_processed_at ON inbox_messages (processed_at);

-- +goose Down
DROP TABLE inbox_messages;
