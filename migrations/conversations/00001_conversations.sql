-- +goose Up
-- updated_at is the concurrency token: every write sets it with the µs clock and is conditional on the old value.
CREATE TABLE conversations (
    id         uuid        PRIMARY KEY,
    title      text        NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- source_message_id is set on assistant replies: UNIQUE makes a re-run reply job a no-op.
CREATE TABLE conversation_messages (
    id                uuid        PRIMARY KEY,
    conversation_id   uuid        NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role              text        NOT NULL CHECK (role IN ('user', 'assistant')),
    content           text        NOT NULL,
    source_message_id uuid        UNIQUE REFERENCES conversation_messages (id) ON DELETE CASCADE,
    created_at        timestamptz NOT NULL
);
CREATE INDEX conversation_messages_conversation ON conversation_messages (conversation_id, created_at, id);

-- +goose Down
DROP TABLE conversation_messages;
DROP TABLE conversations;
