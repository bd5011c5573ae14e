-- +goose Up
-- status is the concurrency token: a decision is conditional on status = 'pending', the result on 'accepted'.
CREATE TABLE proposals (
    id                uuid        PRIMARY KEY,
    conversation_id   uuid        NOT NULL,
    reply_message_id  uuid        NOT NULL,
    source_message_id uuid        NOT NULL,
    action_index      integer     NOT NULL CHECK (action_index >= 0),
    action_type       text        NOT NULL,
    action_params     jsonb       NOT NULL,
    rationale         text        NOT NULL DEFAULT '',
    status            text        NOT NULL CHECK (status IN ('pending', 'accepted', 'rejected', 'applied', 'failed')),
    reason            text        NOT NULL DEFAULT '',
    error             text        NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    decided_at        timestamptz,
    -- one proposal per action of one assistant reply, however often the reply event arrives
    UNIQUE (source_message_id, action_index)
);
CREATE INDEX proposals_status ON proposals (status, id);
CREATE INDEX proposals_conversation ON proposals (conversation_id, id);

-- +goose Down
DROP TABLE proposals;
