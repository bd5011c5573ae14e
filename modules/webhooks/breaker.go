package webhooks

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/modules/webhooks/internal/groupcommit"
	"github.com/keelson/keelson/modules/webhooks/internal/queries"
	"github.com/keelson/keelson/platform/tenancy"
)

// Holding endpoints that hang (docs/webhooks.md#holding-endpoints-that-hang).
//
// An endpoint is held while webhook_subscription_health.held_until is set: the fan-out leaves its new
// deliveries unclaimed and the sweep claims none of them before held_until, so no replica hands them
// to a send slot. The state lives in the database, so every replica skips a held endpoint in the
// statements that claim, instead of claiming its deliveries and putting them back one by one.
//
//   - hold: a request has had no response headers for HangAfter, and no request to the endpoint was
//     answered since it started (holdHanging). held_until is then when that request ends at the
//     latest; the request runs on, so an endpoint that is slow but answers is still served.
//   - open: the request timed out, still with no answer from the endpoint meanwhile: held_until =
//     now + HoldFor (recordOutcomes).
//   - half-open: once held_until passed, the sweep claims one delivery of the endpoint, the probe,
//     and moves held_until past the probe's send (holdProbes); the fan-out still claims nothing.
//   - closed: any answer (whatever its status) or a connection error ends the hold: held_until = NULL.
//
// Retries keep their schedule while held (their next_attempt_at does not move); they are only sent
// later. The probes are attempts like any other, so the disable policy (DisableAfter) still applies.

// holdMargin is how long a hold outlasts the request it waits for, so that request's outcome, not the
// hold's end, decides what follows.
const holdMargin = time.Second

// holdHanging holds sub's endpoint until a request started at started ends, unless a request to the
// endpoint was answered since that one started. It runs in the request's hang timer, beside the send.
func (s *Service) holdHanging(ctx context.Context, sub uuid.UUID, started time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupcommit.WriteTimeout)
	defer cancel()
	held, err := s.store.holdHanging(ctx, sub, started.Add(-successRefresh), started.Add(s.cfg.SendTimeout+holdMargin))
	if err != nil {
		s.log.WarnContext(ctx, "could not hold a hanging endpoint", "subscription_id", sub, "error", err)
		return
	}
	if held {
		s.metrics.held.Inc()
	}
}

// holdHanging sets held_until (never earlier than it is) unless the endpoint answered after
// answeredAfter; held says whether it did. The health row has no tenant: the subscription names it.
func (s store) holdHanging(ctx context.Context, sub uuid.UUID, answeredAfter, until time.Time) (bool, error) {
	res := s.conn(ctx).Exec(`UPDATE webhook_subscription_health SET held_until = greatest(held_until, @until)
		WHERE subscription_id = @sub AND (last_success_at IS NULL OR last_success_at < @answered)
			AND (held_until IS NULL OR held_until < @until)`,
		sql.Named("sub", sub), sql.Named("answered", answeredAfter), sql.Named("until", until))
	if res.Error != nil {
		return false, fmt.Errorf("hold the endpoint of subscription %s: %w", sub, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// holdProbes moves past the probe's send the hold of every endpoint of subs whose hold has passed
// (half-open): the sweep that claimed the probe runs this in its unit of work, so no other sweep
// claims a second delivery of it while the probe is out.
func (s store) holdProbes(ctx context.Context, subs []uuid.UUID, now, until time.Time) error {
	if len(subs) == 0 {
		return nil
	}
	ids := make([]string, len(subs))
	for i, id := range subs {
		ids[i] = id.String()
	}
	err := s.conn(ctx).Exec(`WITH l AS (
		SELECT subscription_id FROM webhook_subscription_health
		WHERE subscription_id = ANY(CAST(@subs AS text[])::uuid[]) AND held_until IS NOT NULL AND held_until <= @now
		ORDER BY subscription_id FOR UPDATE)
	UPDATE webhook_subscription_health h SET held_until = @until FROM l WHERE h.subscription_id = l.subscription_id`,
		sql.Named("subs", queries.Array[string](ids)), sql.Named("now", now), sql.Named("until", until)).Error
	if err != nil {
		return fmt.Errorf("hold probed endpoints: %w", err)
	}
	return nil
}

// putBackRequest is one untaken claim to release until due (Service.putBack).
type putBackRequest struct {
	tenant, id, claim uuid.UUID
	due               time.Time
	slot              *time.Time
}

// putBackBatch is the most claims one statement releases.
const putBackBatch = 512

// writePutBacks releases a batch of untaken claims in one statement; ok says, per request, whether
// its claim was still current.
func (s *Service) writePutBacks(ctx context.Context, reqs []putBackRequest) ([]bool, error) {
	ctx = tenancy.System(ctx, "webhooks put-backs") // the batch spans tenants: every request names its own
	ctx, cancel := context.WithTimeout(ctx, groupcommit.WriteTimeout)
	defer cancel()
	var out []bool
	err := s.batchWrite(ctx, false, func(ctx context.Context) error {
		var err error
		out, err = s.store.putBacks(ctx, reqs)
		return err
	})
	return out, err
}

// putBacks clears untaken claims and makes their deliveries due at their due time, with their
// reserved slots if any; no attempt is counted. Rows are locked in id order, so two replicas'
// batches wait for one another rather than deadlock.
func (s store) putBacks(ctx context.Context, reqs []putBackRequest) ([]bool, error) {
	n := len(reqs)
	ids, tenants, claims := make([]string, n), make([]string, n), make([]string, n)
	dues, slots := make([]time.Time, n), make([]*time.Time, n)
	for i, r := range reqs {
		ids[i], tenants[i], claims[i], dues[i], slots[i] = r.id.String(), r.tenant.String(), r.claim.String(), r.due, r.slot
	}
	q := queries.PutBacks{IDs: ids, Tenants: tenants, Claims: claims, Dues: dues, Slots: slots, Pending: string(StatusPending)}
	rows, err := s.conn(ctx).Raw(q.SQL(), q.Args()...).Rows()
	if err != nil {
		return nil, fmt.Errorf("put back %d claims: %w", n, err)
	}
	defer rows.Close()
	released := make(map[uuid.UUID]bool, n)
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("put back %d claims: %w", n, err)
		}
		released[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("put back %d claims: %w", n, err)
	}
	out := make([]bool, n)
	for i, r := range reqs {
		out[i] = released[r.id]
	}
	return out, nil
}
