package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/keelson/keelson/platform/database"
	"github.com/keelson/keelson/platform/telemetry"
	"github.com/keelson/keelson/platform/tenancy"
)

// Client enqueues jobs. It implements module.JobEnqueuer.
type Client struct {
	db *database.DB
}

// NewClient returns a client writing to db.
func NewClient(db *database.DB) (*Client, error) {
	if db == nil {
		return nil, errors.New("jobs: NewClient: nil db")
	}
	return &Client{db: db}, nil
}

// EnqueueRequest is one job of EnqueueMany.
type EnqueueRequest struct {
	Kind    string
	Payload any
	Options EnqueueOptions
}

const insertJobSQL = `INSERT INTO jobs (id, kind, payload, max_attempts, run_at, dedupe_key, tenant_id, traceparent)
VALUES ($1, $2, $3, $4, COALESCE($5::timestamptz, now()), $6, $7, $8)`

const findUnfinishedSQL = `SELECT id FROM jobs
WHERE kind = $1 AND dedupe_key = $2 AND status IN ('pending', 'processing')`

// dedupeSavepoint isolates a duplicate insert inside a caller's transaction, which 23505 would otherwise abort.
const dedupeSavepoint = "keelson_jobs_enqueue"

// Enqueue inserts a job, inside the unit of work in ctx when there is one (it then commits or rolls
// back with the caller's writes), else on its own. A job with the same kind and DedupeKey still
// pending or processing makes this a no-op that returns Duplicate and that job's id (uuid.Nil if it
// finished meanwhile). Only SQLSTATE 23505 means duplicate; every other error is returned.
// The job carries the tenant ctx acts for; without one, ctx must be a system context (tenancy.System)
// naming the work that spans tenants, else the enqueue fails with tenancy.ErrNoTenant.
func (c *Client) Enqueue(ctx context.Context, kind string, payload any, opts EnqueueOptions) (EnqueueResult, error) {
	row, err := newJobRow(ctx, kind, payload, opts)
	if err != nil {
		return EnqueueResult{}, err
	}
	conn := c.conn(ctx)
	if opts.DedupeKey == "" {
		if _, err := conn.ExecContext(ctx, insertJobSQL, row.args()...); err != nil {
			return EnqueueResult{}, fmt.Errorf("jobs: enqueue %s: %w", kind, err)
		}
		return EnqueueResult{ID: row.id}, nil
	}
	return c.enqueueDeduped(ctx, conn, row)
}

func (c *Client) enqueueDeduped(ctx context.Context, conn gorm.ConnPool, row jobRow) (EnqueueResult, error) {
	inTx := database.InTx(ctx)
	if inTx {
		if _, err := conn.ExecContext(ctx, "SAVEPOINT "+dedupeSavepoint); err != nil {
			return EnqueueResult{}, fmt.Errorf("jobs: enqueue %s: savepoint: %w", row.kind, err)
		}
	}
	_, insertErr := conn.ExecContext(ctx, insertJobSQL, row.args()...)
	if inTx {
		undo := []string{"RELEASE SAVEPOINT " + dedupeSavepoint}
		if insertErr != nil {
			undo = []string{"ROLLBACK TO SAVEPOINT " + dedupeSavepoint, undo[0]}
		}
		for _, stmt := range undo {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return EnqueueResult{}, errors.Join(fmt.Errorf("jobs: enqueue %s: %s: %w", row.kind, stmt, err), insertErr)
			}
		}
	}
	switch {
	case insertErr == nil:
		return EnqueueResult{ID: row.id}, nil
	case !database.IsUniqueViolation(insertErr):
		return EnqueueResult{}, fmt.Errorf("jobs: enqueue %s: %w", row.kind, insertErr)
	}
	var existing uuid.UUID
	err := conn.QueryRowContext(ctx, findUnfinishedSQL, row.kind, row.dedupeKey).Scan(&existing)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return EnqueueResult{}, fmt.Errorf("jobs: enqueue %s: find duplicate: %w", row.kind, err)
	}
	return EnqueueResult{ID: existing, Duplicate: true}, nil
}

const insertManySQL = `INSERT INTO jobs (id, kind, payload, max_attempts, run_at, tenant_id, traceparent)
SELECT id, kind, payload, max_attempts, COALESCE(run_at, now()), $6::uuid, $7::text
FROM unnest($1::uuid[], $2::text[], $3::jsonb[], $4::int[], $5::timestamptz[]) AS t(id, kind, payload, max_attempts, run_at)`

// EnqueueMany inserts many jobs in one unit of work (the caller's, or its own): the ones without a
// DedupeKey in one statement, the others one by one with Enqueue's duplicate rule. Results follow reqs.
func (c *Client) EnqueueMany(ctx context.Context, reqs []EnqueueRequest) ([]EnqueueResult, error) {
	rows := make([]jobRow, len(reqs))
	for i, r := range reqs {
		row, err := newJobRow(ctx, r.Kind, r.Payload, r.Options)
		if err != nil {
			return nil, fmt.Errorf("jobs: enqueue many: request %d: %w", i, err)
		}
		rows[i] = row
	}
	results := make([]EnqueueResult, len(reqs))
	err := c.db.WithTx(ctx, func(ctx context.Context) error {
		conn := c.conn(ctx)
		var ids, kinds, payloads []string
		var maxAttempts []int32
		var runAts []*time.Time
		for i, row := range rows {
			if row.dedupeKey != nil {
				res, err := c.enqueueDeduped(ctx, conn, row)
				if err != nil {
					return err
				}
				results[i] = res
				continue
			}
			results[i] = EnqueueResult{ID: row.id}
			ids = append(ids, row.id.String())
			kinds = append(kinds, row.kind)
			payloads = append(payloads, string(row.payload))
			maxAttempts = append(maxAttempts, int32(row.maxAttempts))
			runAts = append(runAts, row.runAt)
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err := conn.ExecContext(ctx, insertManySQL, ids, kinds, payloads, maxAttempts, runAts, rows[0].tenant, rows[0].traceparent); err != nil {
			return fmt.Errorf("jobs: enqueue many: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

const cancelSQL = `UPDATE jobs SET status = 'cancelled', finished_at = now(), updated_at = now()
WHERE id = $1 AND status = 'pending'`

// Cancel stops a pending job from running. False means it was not pending (running, finished or unknown).
func (c *Client) Cancel(ctx context.Context, id uuid.UUID) (bool, error) {
	res, err := c.conn(ctx).ExecContext(ctx, cancelSQL, id)
	if err != nil {
		return false, fmt.Errorf("jobs: cancel %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("jobs: cancel %s: %w", id, err)
	}
	return n == 1, nil
}

// conn is the caller's transaction when ctx carries one, else the pool; plain database/sql either way.
func (c *Client) conn(ctx context.Context) gorm.ConnPool {
	return c.db.Conn(ctx).Statement.ConnPool
}

// jobRow is a validated job ready to insert.
type jobRow struct {
	id          uuid.UUID
	kind        string
	payload     []byte
	maxAttempts int
	runAt       *time.Time
	dedupeKey   *string
	tenant      *uuid.UUID // the tenant ctx acts for; nil for a job enqueued in a system context
	traceparent *string    // the span ctx is in; nil outside a trace
}

func newJobRow(ctx context.Context, kind string, payload any, opts EnqueueOptions) (jobRow, error) {
	if kind == "" {
		return jobRow{}, errors.New("jobs: enqueue: empty kind")
	}
	if opts.MaxAttempts < 0 {
		return jobRow{}, fmt.Errorf("jobs: enqueue %s: negative MaxAttempts", kind)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return jobRow{}, fmt.Errorf("jobs: enqueue %s: encode payload: %w", kind, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return jobRow{}, fmt.Errorf("jobs: enqueue %s: id: %w", kind, err)
	}
	row := jobRow{id: id, kind: kind, payload: raw, maxAttempts: opts.MaxAttempts}
	if t, ok := tenancy.From(ctx); ok {
		row.tenant = &t
	} else if _, ok := tenancy.SystemReason(ctx); !ok {
		return jobRow{}, fmt.Errorf("jobs: enqueue %s: %w: a job carries its enqueuer's tenant (tenancy.With), "+
			"or is enqueued by work that spans tenants in a named system context (tenancy.System)", kind, tenancy.ErrNoTenant)
	}
	if tp := telemetry.Traceparent(ctx); tp != "" {
		row.traceparent = &tp
	}
	if !opts.RunAt.IsZero() {
		t := opts.RunAt.UTC()
		row.runAt = &t
	}
	if opts.DedupeKey != "" {
		key := opts.DedupeKey
		row.dedupeKey = &key
	}
	return row, nil
}

func (r jobRow) args() []any {
	return []any{r.id, r.kind, r.payload, r.maxAttempts, r.runAt, r.dedupeKey, r.tenant, r.traceparent}
}
