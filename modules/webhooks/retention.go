package webhooks

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/keelson/keelson/platform/tenancy"
)

// retentionSchedule prunes old events, finished deliveries and their attempts, on one replica at a time.
const retentionSchedule = "webhooks.retention"

// DefaultRetention is how long events, finished deliveries and attempts are kept.
const DefaultRetention = 30 * 24 * time.Hour

const (
	defaultRetentionBatch = 5000
	// pruneRunBound caps one run: a large backlog is pruned over several runs, never in one long job.
	pruneRunBound = 2 * time.Minute
)

func (c Config) retentionInterval() time.Duration { return 10 * time.Minute }

func (c Config) retentionBatch() int {
	if c.RetentionBatch > 0 {
		return c.RetentionBatch
	}
	return defaultRetentionBatch
}

// Pruned counts what one Prune removed.
type Pruned struct {
	Deliveries int64 // finished deliveries (each with its attempts)
	Attempts   int64
	Events     int64
}

// Prune deletes, in batches of RetentionBatch, finished (succeeded or failed) deliveries last changed
// before now − Retention with their attempts, then events older than that with no delivery left.
// Pending deliveries — waiting for a retry, claimed, or taken by a sender — are never touched: the
// statement selects only finished rows and locks them with SKIP LOCKED, and PostgreSQL re-checks the
// status of a row another transaction changed meanwhile (a redelivery or recovery making it pending
// again), so such a row is skipped. Retention 0 keeps everything.
func (s *Service) Prune(ctx context.Context) error {
	if s.cfg.Retention <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pruneRunBound)
	defer cancel()
	p, err := s.PruneBefore(ctx, s.now().Add(-s.cfg.Retention), s.cfg.retentionBatch())
	if p.Deliveries+p.Events > 0 {
		s.log.Info("webhooks retention pruned", "deliveries", p.Deliveries, "attempts", p.Attempts, "events", p.Events)
	}
	if ctx.Err() != nil && err != nil {
		return nil // the run's bound: the next run goes on
	}
	return err
}

// PruneBefore deletes finished deliveries, their attempts and delivery-less events from before cutoff.
// Deliveries are found on their primary key: a delivery's time-ordered (v7) id is minted at its
// creation, which precedes its last change, so every row changed before cutoff has an id below the
// bound of cutoff's millisecond. The range is walked in id order from batch to batch (after), which
// spares the table an index on its last change that every outcome would write an entry to.
func (s *Service) PruneBefore(ctx context.Context, cutoff time.Time, batch int) (Pruned, error) {
	ctx = tenancy.System(ctx, "webhooks retention") // every tenant's old rows go
	var p Pruned
	after, bound := uuid.Nil, v7After(cutoff)
	for {
		var deleted struct {
			Deliveries, Attempts int64
			Last                 *uuid.UUID
		}
		err := s.db.Conn(ctx).Raw(`WITH doomed AS (
				SELECT id FROM webhook_deliveries
				WHERE id > @after AND id < @bound AND status IN ('succeeded', 'failed') AND updated_at < @cutoff
				ORDER BY id LIMIT @batch FOR UPDATE SKIP LOCKED),
			attempts AS (DELETE FROM webhook_attempts a USING doomed WHERE a.delivery_id = doomed.id RETURNING 1),
			deliveries AS (DELETE FROM webhook_deliveries d USING doomed WHERE d.id = doomed.id RETURNING 1)
			SELECT (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM attempts) AS attempts,
				(SELECT id FROM doomed ORDER BY id DESC LIMIT 1) AS last`,
			sql.Named("after", after), sql.Named("bound", bound), sql.Named("cutoff", cutoff), sql.Named("batch", batch)).
			Scan(&deleted).Error
		if err != nil {
			return p, fmt.Errorf("prune deliveries: %w", err)
		}
		p.Deliveries += deleted.Deliveries
		p.Attempts += deleted.Attempts
		if deleted.Deliveries < int64(batch) || deleted.Last == nil {
			break
		}
		after = *deleted.Last
	}
	for {
		res := s.db.Conn(ctx).Exec(`DELETE FROM webhook_events WHERE (tenant_id, id) IN (
				SELECT e.tenant_id, e.id FROM webhook_events e
				WHERE e.created_at < ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.tenant_id = e.tenant_id AND d.event_id = e.id)
				ORDER BY e.created_at LIMIT ? FOR UPDATE SKIP LOCKED)`, cutoff, batch)
		if res.Error != nil {
			return p, fmt.Errorf("prune events: %w", res.Error)
		}
		p.Events += res.RowsAffected
		if res.RowsAffected < int64(batch) {
			return p, nil
		}
	}
}

// v7After is the least id a v7 UUID minted after t's millisecond can have: every v7 id of t or
// earlier is below it (PostgreSQL orders uuids byte by byte, and a v7 id begins with its Unix milliseconds).
func v7After(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(t.UnixMilli()) + 1
	for i := 5; i >= 0; i-- {
		id[i] = byte(ms)
		ms >>= 8
	}
	return id
}
