-- +goose Up
-- Background jobs: claimed by one conditional UPDATE with a lease, completed only by their owner.
CREATE TABLE jobs (
    id               uuid        PRIMARY KEY,
    kind             text        NOT NULL CHECK (kind <> ''),
    payload          jsonb       NOT NULL DEFAULT '{}',
    status           text        NOT NULL DEFAULT 'pending'
                                 CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'cancelled')),
    attempt          integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    -- 0 = the kind's default, resolved by the worker.
    max_attempts     integer     NOT NULL DEFAULT 0 CHECK (max_attempts >= 0),
    run_at           timestamptz NOT NULL DEFAULT now(),
    claimed_by       text,
    lease_expires_at timestamptz,
    last_error       text,
    dedupe_key       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    CHECK (status <> 'processing' OR (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- Claim path 1: due pending jobs in run_at order (kind is filtered on the row: all replicas usually run all kinds).
CREATE INDEX jobs_pending_run_at ON jobs (run_at) WHERE status = 'pending';
-- Claim path 2: processing jobs whose lease expired (a crashed worker's claims).
CREATE INDEX jobs_processing_lease ON jobs (lease_expires_at) WHERE status = 'processing';
-- Retention pruning of finished jobs.
CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;
-- One unfinished job per (kind, dedupe_key): a second enqueue gets 23505 and means "already enqueued".
CREATE UNIQUE INDEX jobs_dedupe ON jobs (kind, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'processing');

-- Recurring schedules: one row per name; a lease on the row lets one replica run it at a time.
CREATE TABLE job_schedules (
    name             text        PRIMARY KEY,
    interval_ms      bigint      NOT NULL CHECK (interval_ms > 0),
    next_run_at      timestamptz NOT NULL DEFAULT now(),
    claimed_by       text,
    lease_expires_at timestamptz,
    -- Fencing token: bumped by every claim, checked by heartbeat and completion.
    run_token        bigint      NOT NULL DEFAULT 0,
    last_started_at  timestamptz,
    last_finished_at timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE job_schedules;
DROP TABLE jobs;
