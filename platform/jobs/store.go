package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// planEachTime makes pgx run a statement unnamed, so PostgreSQL plans it with the parameters as constants:
// the fenced batch statements need that for their token array to be hashed. Statement descriptions are
// still cached (one round trip). The claim keeps a cached generic plan: its shape plans well at any size.
const planEachTime = pgx.QueryExecModeCacheDescribe

// store holds the worker-side statements. Every write after the claim checks ownership:
// claimed_by = me, still processing, and the attempt we claimed (the fencing token).
type store struct {
	db       *sql.DB
	me       string
	leaseMS  int64
	asyncSQL string // appended to claims and heartbeats: commit without waiting for the WAL flush
}

func newStore(db *sql.DB, cfg Config) *store {
	s := &store{db: db, me: cfg.InstanceID, leaseMS: cfg.Lease.Milliseconds()}
	if !cfg.DurableClaims {
		s.asyncSQL = ` AND set_config('synchronous_commit', 'off', true) = 'off'`
	}
	return s
}

// claimed is one job this worker now owns.
type claimed struct {
	Job
	storedMaxAttempts int
	reclaimed         bool // taken from an expired lease
	traceparent       sql.NullString
}

// fence identifies one claim of a job: the writes of a worker that lost it match nothing.
type fence struct {
	id      uuid.UUID
	attempt int
}

// claimSQL is the one conditional UPDATE of DESIGN §4: the sub-selects lock free rows with SKIP LOCKED,
// the outer WHERE re-checks "still free", and the rows returned are ours. The outer UPDATE finds rows by
// primary key only (ANY(ARRAY(...)), and a CASE the planner cannot match to the partial indexes): a queue
// table's statistics lag far behind its contents, and a join or BitmapOr planned on them can scan it whole.
// The kind filter is written as array_position(...) IS NOT NULL because the planner then assumes almost
// every row matches (true: replicas run every kind); "kind = ANY" on an unanalyzed table is estimated at
// 0.5% and turns the ordered index scan into a bitmap scan plus a sort of every pending row, per claim.
const claimSQL = `WITH expired AS (
    SELECT id FROM jobs
    WHERE status = 'processing' AND lease_expires_at < now() AND array_position($2::text[], kind) IS NOT NULL
    ORDER BY lease_expires_at LIMIT $3
    FOR UPDATE SKIP LOCKED
), due AS (
    SELECT id FROM jobs
    WHERE status = 'pending' AND run_at <= now() AND array_position($2::text[], kind) IS NOT NULL
    ORDER BY run_at LIMIT $3
    FOR UPDATE SKIP LOCKED
), candidates AS (
    SELECT id FROM expired
    UNION ALL
    SELECT id FROM due
    LIMIT $3
)
UPDATE jobs j SET status = 'processing', claimed_by = $1, attempt = j.attempt + 1,
    lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
WHERE j.id = ANY(ARRAY(SELECT id FROM candidates))
  AND CASE j.status WHEN 'pending' THEN j.run_at <= now() WHEN 'processing' THEN j.lease_expires_at < now() ELSE false END`

const claimReturning = `
RETURNING j.id, j.kind, j.payload, j.attempt, j.max_attempts, j.tenant_id, j.traceparent,
    j.id = ANY(ARRAY(SELECT id FROM expired)), (SELECT count(*) FROM candidates)`

// claim takes up to n free jobs of the given kinds. lost counts candidates the re-check refused.
func (s *store) claim(ctx context.Context, kinds []string, n int) (jobs []claimed, lost int, err error) {
	rows, err := s.db.QueryContext(ctx, claimSQL+s.asyncSQL+claimReturning, s.me, kinds, n, s.leaseMS)
	if err != nil {
		return nil, 0, fmt.Errorf("jobs: claim: %w", err)
	}
	defer rows.Close()
	candidates := 0
	for rows.Next() {
		var c claimed
		var payload []byte
		var tenant uuid.NullUUID
		if err := rows.Scan(&c.ID, &c.Kind, &payload, &c.Attempt, &c.storedMaxAttempts, &tenant, &c.traceparent, &c.reclaimed, &candidates); err != nil {
			return nil, 0, fmt.Errorf("jobs: claim: scan: %w", err)
		}
		c.Payload = json.RawMessage(payload)
		c.TenantID = tenant.UUID
		jobs = append(jobs, c)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("jobs: claim: %w", err)
	}
	return jobs, max(candidates-len(jobs), 0), nil
}

// Batch statements match the fence without a join: ids by primary key, then "id/attempt" tokens against
// an array PostgreSQL hashes (parameters are planned as constants, see planEachTime). A join with
// unnest() planned on stale statistics became a nested loop costing seconds per thousand rows.
const completeSQL = `UPDATE jobs j SET status = 'completed', finished_at = now(), updated_at = now(),
    lease_expires_at = NULL, last_error = NULL
WHERE j.id = ANY($2::uuid[]) AND j.claimed_by = $1 AND j.status = 'processing'
  AND (j.id::text || '/' || j.attempt::text) = ANY($3::text[])
RETURNING j.id`

// complete marks the given claims completed in one statement and returns the ids it changed;
// the others were no longer ours.
func (s *store) complete(ctx context.Context, fences []fence) (map[uuid.UUID]bool, error) {
	return s.fenced(ctx, "complete", completeSQL, fences)
}

const releaseSQL = `UPDATE jobs j SET status = 'pending', claimed_by = NULL, lease_expires_at = NULL,
    attempt = j.attempt - 1, updated_at = now()
WHERE j.id = ANY($2::uuid[]) AND j.claimed_by = $1 AND j.status = 'processing'
  AND (j.id::text || '/' || j.attempt::text) = ANY($3::text[])
RETURNING j.id`

// release hands unfinished claims back (shutdown): pending again, the attempt not counted.
func (s *store) release(ctx context.Context, fences []fence) (map[uuid.UUID]bool, error) {
	return s.fenced(ctx, "release", releaseSQL, fences)
}

const heartbeatSQL = `UPDATE jobs j SET lease_expires_at = now() + $4 * interval '1 millisecond'
WHERE j.id = ANY($2::uuid[]) AND j.claimed_by = $1 AND j.status = 'processing'
  AND (j.id::text || '/' || j.attempt::text) = ANY($3::text[])`

// extend renews the leases of running claims and returns the ids still ours.
func (s *store) extend(ctx context.Context, fences []fence) (map[uuid.UUID]bool, error) {
	return s.fenced(ctx, "extend lease", heartbeatSQL+s.asyncSQL+"\nRETURNING j.id", fences, s.leaseMS)
}

func (s *store) fenced(ctx context.Context, op, query string, fences []fence, extra ...any) (map[uuid.UUID]bool, error) {
	ids := make([]string, len(fences))
	tokens := make([]string, len(fences))
	for i, f := range fences {
		ids[i] = f.id.String()
		tokens[i] = ids[i] + "/" + strconv.Itoa(f.attempt)
	}
	rows, err := s.db.QueryContext(ctx, query, append([]any{planEachTime, s.me, ids, tokens}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("jobs: %s: %w", op, err)
	}
	defer rows.Close()
	ours := make(map[uuid.UUID]bool, len(fences))
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("jobs: %s: scan: %w", op, err)
		}
		ours[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobs: %s: %w", op, err)
	}
	return ours, nil
}

const retrySQL = `UPDATE jobs SET status = 'pending', claimed_by = NULL, lease_expires_at = NULL,
    run_at = now() + $4 * interval '1 millisecond', last_error = $5, updated_at = now()
WHERE id = $1 AND claimed_by = $2 AND status = 'processing' AND attempt = $3`

const failSQL = `UPDATE jobs SET status = 'failed', finished_at = now(), lease_expires_at = NULL,
    last_error = $4, updated_at = now()
WHERE id = $1 AND claimed_by = $2 AND status = 'processing' AND attempt = $3`

// retry puts a failed attempt back to pending after delay; fail ends the job. False = not ours any more.
func (s *store) retry(ctx context.Context, f fence, delay time.Duration, reason string) (bool, error) {
	return s.fencedOne(ctx, "retry", retrySQL, f.id, s.me, f.attempt, delay.Milliseconds(), reason)
}

func (s *store) fail(ctx context.Context, f fence, reason string) (bool, error) {
	return s.fencedOne(ctx, "fail", failSQL, f.id, s.me, f.attempt, reason)
}

func (s *store) fencedOne(ctx context.Context, op, query string, args ...any) (bool, error) {
	res, err := s.db.ExecContext(ctx, query, append([]any{planEachTime}, args...)...)
	if err != nil {
		return false, fmt.Errorf("jobs: %s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("jobs: %s: %w", op, err)
	}
	return n == 1, nil
}

const depthSQL = `SELECT status, count(*) FROM jobs GROUP BY status`

func (s *store) depth(ctx context.Context) (map[Status]float64, error) {
	rows, err := s.db.QueryContext(ctx, depthSQL)
	if err != nil {
		return nil, fmt.Errorf("jobs: depth: %w", err)
	}
	defer rows.Close()
	out := map[Status]float64{}
	for rows.Next() {
		var st string
		var n float64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("jobs: depth: scan: %w", err)
		}
		out[Status(st)] = n
	}
	return out, rows.Err()
}

// pruneSQL deletes a bounded batch so no transaction holds many rows (or vacuum) for long.
const pruneSQL = `DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs WHERE finished_at < now() - $1 * interval '1 millisecond' LIMIT $2)`

func (s *store) prune(ctx context.Context, retention time.Duration, batch int) (int64, error) {
	res, err := s.db.ExecContext(ctx, pruneSQL, retention.Milliseconds(), batch)
	if err != nil {
		return 0, fmt.Errorf("jobs: prune: %w", err)
	}
	return res.RowsAffected()
}
