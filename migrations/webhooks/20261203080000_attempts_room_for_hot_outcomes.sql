-- +goose Up
-- An outcome changes no indexed column of its attempt (started_at is the take's): with room on the
-- row's page, PostgreSQL writes the closed version there and touches none of the table's indexes (HOT).
-- An open attempt is small; its closed version adds the response's status, headers and excerpt, hence the room.
ALTER TABLE webhook_attempts SET (fillfactor = 50);

-- +goose Down
ALTER TABLE webhook_attempts RESET (fillfactor);
