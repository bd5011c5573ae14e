-- +goose Up
-- A note's row version is xmin: no version column. conversation_id is UNIQUE so a redelivered
-- conversation.created event cannot create a second note for the same conversation.
CREATE TABLE notes (
    id              uuid        PRIMARY KEY,
    conversation_id uuid        UNIQUE,
    title           text        NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
    body            text        NOT NULL,
    word_count      integer,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

-- +goose Down
DROP TABLE notes;
