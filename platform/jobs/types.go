// Package jobs runs background work on PostgreSQL: jobs and recurring schedules claimed by
// conditional UPDATEs with expiring leases, completed only by their owner.
package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Job is what a handler receives.
type Job struct {
	ID          uuid.UUID
	Kind        string
	Payload     json.RawMessage
	Attempt     int
	MaxAttempts int
	// TenantID is the tenant the job was enqueued for (its handler's ctx acts for it); uuid.Nil for
	// a job enqueued in a system context, whose handler runs in one named after its kind.
	TenantID uuid.UUID
}

// Decode unmarshals the payload into v.
func (j Job) Decode(v any) error {
	if err := json.Unmarshal(j.Payload, v); err != nil {
		return fmt.Errorf("job %s %s: decode payload: %w", j.Kind, j.ID, err)
	}
	return nil
}

// Handler runs one job. It must be idempotent: a job whose worker dies runs again elsewhere.
// A returned error (or a panic) is a failed attempt, retried with backoff until MaxAttempts.
type Handler func(ctx context.Context, job Job) error

// KindOptions tune one job kind. Zero values take the defaults.
type KindOptions struct {
	MaxAttempts int           // default 5
	Timeout     time.Duration // deadline of one attempt; default 1m (the lease is extended while it runs)
}

// Kind registers a handler for a job kind.
type Kind struct {
	Name    string
	Handle  Handler
	Options KindOptions
}

// Status is where a job is in its life.
type Status string

// Job statuses, as stored in jobs.status.
const (
	StatusPending    Status = "pending"
	StatusProcessing Status = "processing"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
	StatusCancelled  Status = "cancelled"
)

// allStatuses lists every status, for the depth gauge.
func allStatuses() []Status {
	return []Status{StatusPending, StatusProcessing, StatusCompleted, StatusFailed, StatusCancelled}
}

// EnqueueOptions tune one enqueue. Zero values take the kind's defaults.
type EnqueueOptions struct {
	DedupeKey   string    // unique per kind while the job is unfinished
	RunAt       time.Time // default now
	MaxAttempts int
}

// EnqueueResult says which job holds the work; Duplicate means one with the same dedupe key was already enqueued.
type EnqueueResult struct {
	ID        uuid.UUID
	Duplicate bool
}

// Schedule is a recurring task that runs at most once at a time across all replicas.
type Schedule struct {
	Name     string
	Interval time.Duration
	Run      func(ctx context.Context) error
}
