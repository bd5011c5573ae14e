-- +goose Up
-- The W3C traceparent of the span that enqueued a job: its worker's span joins that trace.
-- NULL when the enqueue happened outside any trace (schedules, tracing off without a caller's traceparent).
ALTER TABLE jobs ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE jobs DROP COLUMN traceparent;
