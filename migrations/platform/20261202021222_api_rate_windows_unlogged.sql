-- +goose Up
-- Rate-limit counters are worth no WAL and no fsync: losing them in a crash only restarts a window.
-- Logged, one upsert per request cost 6.7 ms; unlogged, 1.5 ms (docs/performance.md).
ALTER TABLE api_rate_windows SET UNLOGGED;

-- +goose Down
ALTER TABLE api_rate_windows SET LOGGED;
